// Package bench is the spool command's "bench" command: benchmark scenarios
// that run Spool on a scratch store (a fresh schema, database or file beside
// the one given) and print figures, as JSON or tables, with optional charts.
// Each scenario is a file of its own that registers itself; bench.go and
// harness.go hold what they share (common flags, the scratch store's life,
// progress, result and chart output).
package bench
