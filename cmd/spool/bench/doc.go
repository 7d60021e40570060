// Package bench is the spool command's "bench" command: benchmark scenarios
// that run Spool on a scratch store (a fresh schema, database or file beside
// the one given) and print figures, as JSON or tables, with optional charts.
// Each scenario is a file of its own that registers itself; bench.go and
// harness.go hold what they share (common flags, the scratch store's life,
// progress, result and chart output).
//
// The package is public so that the lab (the bench/lab module: chaos,
// hosts, failover, shards, contention, ceiling and rowcost, which start
// servers of their own and so stay out of the spool binary) builds its
// experiments on the same harness. Its exported names serve that one
// importer and carry no compatibility promise.
package bench
