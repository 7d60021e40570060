#!/usr/bin/env bash
# Long chaos run, docs/guarantees.md's "Latest long run": builds the lab
# (bench/lab) and runs `lab chaos` for 3 minutes of faults on each of PostgreSQL,
# MariaDB and SQLite (servers of its own, on free loopback ports; never the
# shared ones), 50,000 jobs each, one backend after the other (about 12
# minutes in all on a 2-core machine). Stdout is markdown to paste into
# docs/guarantees.md: a line naming the date and commit, then the tables of
# counts, invariants and recovery per fault per backend; progress goes to
# stderr. It exits non-zero when any invariant is violated.
#
#   .ci/chaos-long.sh > chaos-long.md
#
# CHAOS_SEED (default 1) and CHAOS_DURATION (default 3m) change the run;
# CHAOS_KEEP=1 keeps each backend's directory (audit, worker and server
# logs, the SQLite file) to look into a figure, and names it on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$HOME/go/bin:$PATH"

# A missing server binary fails the run; it never skips a backend.
missing=0
for bin in /usr/lib/postgresql/15/bin/initdb /usr/lib/postgresql/15/bin/pg_ctl; do
  [ -x "$bin" ] || { echo "ci/chaos-long: $bin not found (install postgresql-15)" >&2; missing=1; }
done
for bin in mariadbd mariadb-install-db; do
  command -v "$bin" >/dev/null || { echo "ci/chaos-long: $bin not found (install mariadb-server)" >&2; missing=1; }
done
[ "$missing" = 0 ] || exit 1

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/lab" ./bench/lab

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  commit="$commit with uncommitted changes"
fi
echo "Run $(date -u '+%Y-%m-%d from %H:%M UTC') at commit $commit, on $(nproc) cores, one backend after the other:"
echo
"$bin/lab" chaos --backend all --duration "${CHAOS_DURATION:-3m}" --jobs 50000 \
  --seed "${CHAOS_SEED:-1}" --markdown --timeout 45m ${CHAOS_KEEP:+--keep-dir}
