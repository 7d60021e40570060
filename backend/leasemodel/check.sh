#!/usr/bin/env bash
# Model-check the lease protocol (lease.pml) with Spin: the model must hold
# every property, with durable claims and with claims a server crash can
# undo (-DASYNC_CLAIMS), and each deliberately broken variant must violate
# the one property it breaks. Runs two verifications at a time. Installs
# Debian's spin when it is missing.
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

# The runs: name, Spin's defines, search, and the property the run must
# violate ("-" for a run in which every property must hold). An exhaustive
# run uses a depth-first search with a hash table of 2^26 slots (the
# asynchronous model stores about 31 million states); "bfs" finds the
# shortest violation, where a depth-first search would wander for millions
# of states first. Longest first: they start first.
runs='async|-DASYNC_CLAIMS|dfs|-
model||dfs|-
ASYNC_STRICT_DONE|-DASYNC_CLAIMS -DSTRICT_DONE|bfs|no_start_after_done
ASYNC_BROKEN_NO_EPOCH|-DASYNC_CLAIMS -DBROKEN_NO_EPOCH|dfs|no_stale_completion
ASYNC_BROKEN_EPOCH_ASYNC|-DASYNC_CLAIMS -DBROKEN_EPOCH_ASYNC|dfs|no_stale_completion
BROKEN_CLAIM_TIME|-DBROKEN_CLAIM_TIME|dfs|no_start_after_lease_ended
BROKEN_NO_FENCE|-DBROKEN_NO_FENCE|dfs|no_stale_completion
BROKEN_RESCUE_EARLY|-DBROKEN_RESCUE_EARLY|dfs|no_two_live_leases
BROKEN_NO_RESCUE|-DBROKEN_NO_RESCUE|dfs|job_done_in_time'

# verify NAME DEFINES SEARCH: Spin's report in $work/NAME/pan.out, and for
# a violation the property it broke in $work/NAME/broke: the name in the
# comment on the failing assertion's line, or invalid_end_state.
verify() {
  local name=$1 defines=$2 search=$3 dir="$work/$1"
  mkdir "$dir"
  cp lease.pml "$dir/"
  (
    cd "$dir"
    # shellcheck disable=SC2086 # defines are words
    spin -a $defines lease.pml >/dev/null
    local cflags=(-w -O2 -DSAFETY -DCOLLAPSE -DNOBOUNDCHECK -DMEMLIM=4096) args=(-m200000 -w26)
    if [ "$search" = bfs ]; then cflags+=(-DBFS); args=(-w24); fi
    # -w: gcc's bounds warnings about Spin's generated undo code are noise.
    gcc "${cflags[@]}" -o pan pan.c
    TIMEFORMAT=%U
    { time ./pan "${args[@]}" >pan.out 2>&1 || true; } 2>cpu
    if [ -f lease.pml.trail ]; then
      # shellcheck disable=SC2086
      spin -t $defines lease.pml >trail.txt 2>&1 || true
      line=$(sed -n 's/^spin: lease.pml:\([0-9]*\), Error: assertion violated.*/\1/p' trail.txt | head -1)
      if [ -n "$line" ]; then
        sed -n "${line}s|.*/\* \([a-z_]*\).*|\1|p" lease.pml >broke
      elif grep -q "invalid end state" pan.out; then
        echo invalid_end_state >broke
      else
        echo unknown >broke
      fi
    fi
  )
}

start=$(date +%s)
jobs_max=2
while IFS='|' read -r name defines search _; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || true; done
  verify "$name" "$defines" "$search" &
done <<<"$runs"
wait

fail=0
errors_of() { sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$work/$1/pan.out"; }
states_of() { sed -n 's/^ *\([0-9e.+]*\) states, stored.*/\1/p' "$work/$1/pan.out"; }
while IFS='|' read -r name defines search expect; do
  out="$work/$name/pan.out"
  cpu=$(cat "$work/$name/cpu" 2>/dev/null || echo '?')
  broke=$(cat "$work/$name/broke" 2>/dev/null || true)
  if [ "$expect" = - ]; then
    if [ "$(errors_of "$name")" != 0 ] || grep -q "search not completed\|max search depth too small\|out of memory" "$out"; then
      echo "leasemodel: FAIL: $name${defines:+ ($defines)} violates ${broke:-a property} or its search was incomplete" >&2
      cat "$out" >&2
      [ -f "$work/$name/trail.txt" ] && tail -40 "$work/$name/trail.txt" >&2
      fail=1
    else
      echo "leasemodel: ok: $name${defines:+ ($defines)}: every property holds ($(states_of "$name") states, exhaustive, ${cpu}s CPU)"
    fi
  elif [ "$(errors_of "$name")" = 0 ]; then
    echo "leasemodel: FAIL: $name passed, so the model cannot see that defect" >&2
    fail=1
  elif [ "$broke" != "$expect" ]; then
    echo "leasemodel: FAIL: $name failed, but on ${broke:-?}, not on $expect:" >&2
    grep "assertion violated\|invalid end state" "$out" >&2 || cat "$out" >&2
    fail=1
  else
    echo "leasemodel: ok: $name violates $expect ($(grep -o 'at depth [0-9]*' "$out" | head -1), ${cpu}s CPU)"
  fi
done <<<"$runs"

echo "leasemodel: $(( $(date +%s) - start ))s"
exit $fail
