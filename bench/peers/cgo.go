package main

import (
	"os/exec"
	"strings"
	"sync"
)

// cgoEnabled reports whether the go command builds with cgo here (the
// River-SQLite runner is built by it).
var cgoEnabled = sync.OnceValue(func() bool {
	out, err := exec.Command("go", "env", "CGO_ENABLED").Output()
	return err == nil && strings.TrimSpace(string(out)) == "1"
})
