#!/usr/bin/env bash
# Model-check the lease protocol (lease.pml) with Spin: the model must hold
# every property, and each deliberately broken variant must violate the one
# property it breaks. Installs Debian's spin when it is missing.
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v spin >/dev/null; then
  echo "leasemodel: installing spin"
  if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq spin >/dev/null
fi
command -v gcc >/dev/null || { echo "leasemodel: gcc is needed to compile Spin's verifier" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp lease.pml "$work/"

# verify NAME [-DFLAG]: runs an exhaustive safety search (assertions and
# invalid end states) and leaves Spin's report in $work/NAME.out.
verify() {
  local name=$1; shift
  (
    cd "$work"
    rm -f pan pan.* lease.pml.trail
    spin -a "$@" lease.pml >/dev/null
    # -w: gcc's bounds warnings about Spin's generated undo code are noise.
    gcc -w -O2 -DSAFETY -DCOLLAPSE -DMEMLIM=4096 -o pan pan.c
    ./pan -m200000 >"$name.out" 2>&1 || true
    if [ -f lease.pml.trail ]; then spin -t "$@" lease.pml >"$name.trail.txt" 2>&1 || true; fi
  )
}

errors_of() { sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$work/$1.out"; }

start=$(date +%s)
fail=0

verify model
if [ "$(errors_of model)" != 0 ] || grep -q "search not completed\|max search depth too small" "$work/model.out"; then
  echo "leasemodel: FAIL: the model violates a property or the search was incomplete" >&2
  cat "$work/model.out" >&2
  [ -f "$work/model.trail.txt" ] && tail -40 "$work/model.trail.txt" >&2
  fail=1
else
  states=$(sed -n 's/^ *\([0-9e.+]*\) states, stored.*/\1/p' "$work/model.out")
  echo "leasemodel: ok: every property holds ($states states, exhaustive)"
fi

# Each broken variant and the assertion it must violate.
while read -r flag expect; do
  verify "$flag" "-D$flag"
  if [ "$(errors_of "$flag")" = 0 ]; then
    echo "leasemodel: FAIL: $flag passed, so the model cannot see that defect" >&2
    fail=1
  elif ! grep -qF -- "$expect" "$work/$flag.out"; then
    echo "leasemodel: FAIL: $flag failed, but not on $expect:" >&2
    grep "assertion violated\|invalid end state" "$work/$flag.out" >&2 || cat "$work/$flag.out" >&2
    fail=1
  else
    echo "leasemodel: ok: $flag is caught ($(grep -o 'assertion violated.*' "$work/$flag.out" | head -1))"
  fi
done <<'EOF'
BROKEN_CLAIM_TIME (job_fence==fence))&&(now<=job_lease)
BROKEN_NO_FENCE assertion violated (job_fence==fence)
BROKEN_RESCUE_EARLY (running[0]&&running[1])
BROKEN_NO_RESCUE assertion violated (now<
EOF

echo "leasemodel: $(( $(date +%s) - start ))s"
exit $fail
