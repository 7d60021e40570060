package scenarios

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/spoolq/spool/cmd/spool/cli"
)

// New returns the lab's top-level command, writing to env: it dispatches
// to the experiment named by its first argument.
func New(env *cli.Env) cli.Command { return &labCommand{m: env} }

// labCommand dispatches the experiments.
type labCommand struct{ m *cli.Env }

// labScenario is one registered experiment.
type labScenario struct {
	// summary is the one-line description shown by 'lab -h'.
	summary string
	// newCommand returns the experiment's command.
	newCommand func(m *cli.Env) cli.Command
}

// labScenarios maps experiment names to experiments; each bench_<name>.go
// file registers its own in an init function.
var labScenarios = map[string]labScenario{}

// registerBenchScenario adds an experiment; a duplicate name is a
// programming error.
func registerBenchScenario(name, summary string, newCommand func(m *cli.Env) cli.Command) {
	if _, dup := labScenarios[name]; dup {
		panic("lab: scenario registered twice: " + name)
	}
	labScenarios[name] = labScenario{summary: summary, newCommand: newCommand}
}

// scenarioNames returns the registered experiment names, sorted.
func scenarioNames() []string {
	names := make([]string, 0, len(labScenarios))
	for name := range labScenarios {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Run implements cli.Command.
func (c *labCommand) Run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return cli.Usagef("", "missing experiment (%s)", strings.Join(scenarioNames(), ", "))
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		return &cli.HelpRequest{Usage: c.Usage()}
	}
	sc, ok := labScenarios[args[0]]
	if !ok {
		return cli.Usagef("", "unknown experiment %q (want one of %s)", args[0], strings.Join(scenarioNames(), ", "))
	}
	return sc.newCommand(c.m).Run(ctx, args[1:])
}

// Usage implements cli.Command.
func (c *labCommand) Usage() string {
	var b strings.Builder
	b.WriteString(`Usage: lab <experiment> [flags]   (from the repository: go run ./bench/lab <experiment>)

Spool's laboratory: experiments that start their own database servers,
clusters and network namespaces, or compare Spool with raw SQL. The
benchmarks a user runs against their own database are 'spool bench'.

Experiments:

`)
	for _, name := range scenarioNames() {
		fmt.Fprintf(&b, "\t%-11s %s\n", name, labScenarios[name].summary)
	}
	b.WriteString("\nRun 'lab <experiment> -h' for an experiment's flags.\n")
	return b.String()
}
