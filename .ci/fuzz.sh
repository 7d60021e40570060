#!/usr/bin/env bash
# Short fuzz run for CI: each target for a few seconds on top of its seed
# corpus (the f.Add seeds in the code, which `go test` also runs every time).
# A finding fails the run; go test writes the failing input under the
# package's testdata/fuzz/<target>/, where it joins the corpus once fixed.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$HOME/go/bin:$PATH"
time="${FUZZ_TIME:-15s}"
run() { # package, target
  echo "ci/fuzz: $2 in $1 for $time"
  go test -run '^$' -fuzz "^$2\$" -fuzztime "$time" "$1"
}
run ./backend/sqlite FuzzInsert
run ./backend/sqlite FuzzParseURL
run ./backend/mysql FuzzParseURL
run ./backend/postgres FuzzParseInsertNotice
run ./backend/postgres FuzzSQLEnqueue
run ./backend/mysql FuzzSQLEnqueue
