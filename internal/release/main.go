// Command release cuts a release of every module of the Spool repository,
// and builds the file-system module proxy the consumer test and CI's
// module checks use. Run from the repository root:
//
//	go run ./internal/release [-n] vX.Y.Z   set every sibling requirement to vX.Y.Z, commit, tag every module (-n: say what it would do)
//	go run ./internal/release proxy DIR vX.Y.Z   write a module proxy of the working tree at vX.Y.Z into DIR (GOPROXY=file://DIR)
//	go run ./internal/release tidy          go mod tidy every module against a proxy of the working tree
//	go run ./internal/release check         vet every module with only its own go.mod and go.sum
//
// docs/releasing.md tells how to cut a release.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "release:", strings.TrimPrefix(err.Error(), "release: "))
		os.Exit(1)
	}
}

const usage = `usage:
  release [-n] vX.Y.Z          set every sibling requirement to vX.Y.Z, commit, tag every module
  release proxy DIR vX.Y.Z     write a module proxy of the working tree at vX.Y.Z into DIR
  release tidy                 go mod tidy every module against a proxy of the working tree
  release check                vet every module with only its own go.mod and go.sum
`

// run is the command with its arguments.
func run(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "proxy":
			if len(args) != 3 {
				return errors.New("proxy wants a directory and a version\n" + usage)
			}
			if err := CheckVersion(args[2]); err != nil {
				return err
			}
			ws, err := LoadWorkspace(".")
			if err != nil {
				return err
			}
			_, err = BuildProxy(ws, args[2], args[1])
			return err
		case "tidy":
			if len(args) != 1 {
				return errors.New("tidy takes no arguments\n" + usage)
			}
			return Tidy(".", stderr)
		case "check":
			if len(args) != 1 {
				return errors.New("check takes no arguments\n" + usage)
			}
			return Check(".", stderr)
		}
	}
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	dryRun := fs.Bool("n", false, "say what would be done, change nothing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("want one version\n" + usage)
	}
	return Release(ReleaseOptions{Root: ".", Version: fs.Arg(0), DryRun: *dryRun, Out: stdout})
}
