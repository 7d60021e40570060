#!/usr/bin/env bash
# Short chaos suite for CI: builds the lab (bench/lab) and runs `lab chaos` on
# PostgreSQL, MariaDB and SQLite (servers of its own, on free loopback ports;
# never the shared ones), 35 s of faults each, failing on any invariant
# violation. Beside the plain jobs run the composed workloads: a workflow of
# 1,000 tasks, 20 batches with callbacks, many-worker jobs, jobs of durable
# steps with sleeps and signal waits, and debounced inserts from every worker
# (fewer steps jobs on MariaDB, whose step records are slower).
# docs/guarantees.md describes the faults and the invariants;
# .ci/chaos-long.sh is its long run (3 minutes of faults per backend).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$HOME/go/bin:$PATH"

# A missing server binary fails the suite; it never skips a backend.
missing=0
for bin in /usr/lib/postgresql/15/bin/initdb /usr/lib/postgresql/15/bin/pg_ctl; do
  [ -x "$bin" ] || { echo "ci/chaos: $bin not found (install postgresql-15)" >&2; missing=1; }
done
for bin in mariadbd mariadb-install-db; do
  command -v "$bin" >/dev/null || { echo "ci/chaos: $bin not found (install mariadb-server)" >&2; missing=1; }
done
[ "$missing" = 0 ] || exit 1

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/lab" ./bench/lab

status=0
for backend in postgres mysql sqlite; do
  echo "ci/chaos: $backend"
  steps=300
  [ "$backend" = mysql ] && steps=150
  if ! "$bin/lab" chaos --backend "$backend" --duration 35s --jobs 6000 \
      --workflow-tasks 1000 --batches 20 --many-jobs 500 --step-jobs "$steps" --debounce-keys 5 \
      --drain-timeout 45s --seed "${CHAOS_SEED:-1}" --quiet --timeout 150s; then
    echo "ci/chaos: $backend: FAILED" >&2
    status=1
  fi
done
exit $status
