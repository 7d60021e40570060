package testdb

import (
	"flag"
	"strconv"
)

// DefaultParallel makes n the default of -test.parallel (how many tests
// that call t.Parallel run at once, the number of cores otherwise) for the
// package whose TestMain calls it, before m.Run; a -parallel given on the
// command line is kept. For a backend's package, whose tests spend their
// time waiting on leases, timers and the database server rather than on
// the CPU, so that the number of cores is no measure of how many can run
// at once. n is no budget of connections: conformance.MaxParallel and
// PoolMaxConns are.
func DefaultParallel(n int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", strconv.Itoa(n)); err != nil {
			panic("testdb: set -test.parallel: " + err.Error())
		}
	}
}
