package ui

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

// A workflow's graph is drawn as an SVG on the server: its tasks in rows by
// level (a task's level is one more than its deepest dependency's), each
// a box coloured by its state and linked to its job's page, with an arrow
// from each dependency to its dependent. A big workflow would make a page
// no browser draws usefully (100,000 boxes, a million arrows), so above
// these bounds the graph is drawn collapsed: one box per level and kind,
// with its tasks' counts by state, and levels grouped into bands when there
// are more than graphMaxRows of them. Either way the page's work is one
// store read (Client.Workflow: the tasks and the edges) and a pass over it.
const (
	// GraphMaxTasks is the most tasks a workflow may have to be drawn a
	// box per task.
	GraphMaxTasks = 300
	// GraphMaxEdges is the most dependencies it may have to be drawn so.
	GraphMaxEdges = 1500
	// graphMaxRows bounds the bands of levels a collapsed graph draws.
	graphMaxRows = 100
	// graphMaxKinds bounds the boxes of one band: further kinds share a
	// box ("other kinds").
	graphMaxKinds = 16
	// graphMaxArrows bounds the arrows a collapsed graph draws.
	graphMaxArrows = 2000
	// graphAttention is how many unfinished or failed tasks a collapsed
	// graph lists with links.
	graphAttention = 50
)

// Box geometry, in SVG user units (pixels).
const (
	boxW, boxH, boxHC = 150, 26, 44 // width; height of a task's box, of a group's
	gapX, gapY        = 18, 34      // between boxes of a line, between lines
	perLine           = 8           // boxes per line: a wider level wraps
	margin            = 10
)

// graph is a workflow's drawing.
type graph struct {
	Collapsed     bool
	Width, Height int
	Nodes         []*gnode
	Edges         []gedge
	// Levels and Band say how the collapsed graph grouped (Band levels
	// a row); MoreArrows counts arrows not drawn (graphMaxArrows).
	Levels, Band, MoreArrows int
	// Attention lists tasks a collapsed graph cannot link one by one:
	// running, discarded and cancelled ones, at most graphAttention.
	Attention []*spool.JobRow
	// Groups are the collapsed graph's boxes as a table's rows.
	Groups []*gnode
}

// gnode is one box: a task (Job set) or a group of tasks.
type gnode struct {
	X, Y, W, H int
	Job        *spool.JobRow
	Label      string // what the box says (cut to fit)
	Title      string // the whole of it, as a tooltip
	Level      string // "3", or "10–19" for a band
	Kind       string
	Total      int64
	Counts     map[backend.State]int64
	Bars       []gbar
	// order places the box among its line's (mean position of its
	// dependencies' boxes).
	order float64
	// line is the box's level (or band) index.
	line int
}

// gbar is one state's part of a group's bar.
type gbar struct {
	X, W  int
	State backend.State
	N     int64
}

// gedge is one arrow: an SVG path.
type gedge struct {
	D     string
	Class string
	Title string
}

// CountText prints a group's counts by state in lifecycle order.
func (n *gnode) CountText() string {
	var parts []string
	for _, s := range backend.AllStates {
		if c := n.Counts[s]; c > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c, s))
		}
	}
	return strings.Join(parts, ", ")
}

// taskLevels returns each task's level by job id, in one pass in
// topological order (Kahn's algorithm): no recursion, so a chain of
// 100,000 tasks is no deeper a stack than one task. Tasks on a cycle (a
// store never returns one) or behind one keep level 0.
func taskLevels(d *spool.WorkflowDetail) (map[int64]int, map[int64][]int64) {
	level := make(map[int64]int, len(d.Jobs))
	left := make(map[int64]int, len(d.Jobs))
	children := make(map[int64][]int64, len(d.Jobs))
	parents := make(map[int64][]int64, len(d.Jobs))
	for _, j := range d.Jobs {
		level[j.ID] = 0
	}
	for _, e := range d.Edges {
		_, okP := level[e.Parent]
		_, okC := level[e.Child]
		if !okP || !okC {
			continue // a task deleted (JobDelete): its edges do not count
		}
		children[e.Parent] = append(children[e.Parent], e.Child)
		parents[e.Child] = append(parents[e.Child], e.Parent)
		left[e.Child]++
	}
	queue := make([]int64, 0, len(d.Jobs))
	for _, j := range d.Jobs {
		if left[j.ID] == 0 {
			queue = append(queue, j.ID)
		}
	}
	for k := 0; k < len(queue); k++ {
		id := queue[k]
		for _, c := range children[id] {
			level[c] = max(level[c], level[id]+1)
			if left[c]--; left[c] == 0 {
				queue = append(queue, c)
			}
		}
	}
	return level, parents
}

// buildGraph lays out a workflow: a box per task within the bounds, else
// collapsed.
func (h *Handler) buildGraph(d *spool.WorkflowDetail) *graph {
	level, parents := taskLevels(d)
	if len(d.Jobs) <= GraphMaxTasks && len(d.Edges) <= GraphMaxEdges {
		return h.fullGraph(d, level, parents)
	}
	return h.collapsedGraph(d, level, parents)
}

// fullGraph draws a box per task. Each level's boxes are ordered by the
// mean position of their dependencies (fewer crossing arrows), then name.
func (h *Handler) fullGraph(d *spool.WorkflowDetail, level map[int64]int, parents map[int64][]int64) *graph {
	g := &graph{}
	var rows [][]*gnode
	byID := make(map[int64]*gnode, len(d.Jobs))
	for _, j := range d.Jobs {
		l := level[j.ID]
		for len(rows) <= l {
			rows = append(rows, nil)
		}
		n := &gnode{Job: j, W: boxW, H: boxH, line: l, Label: cut(j.WorkflowTask, 20),
			Title: fmt.Sprintf("%s · %s · %s (job %d)", j.WorkflowTask, j.Kind, j.State, j.ID)}
		rows[l] = append(rows[l], n)
		byID[j.ID] = n
	}
	for _, row := range rows {
		for _, n := range row {
			var sum float64
			ps := parents[n.Job.ID]
			for _, p := range ps {
				sum += float64(byID[p].X)
			}
			if len(ps) > 0 {
				n.order = sum / float64(len(ps))
			}
		}
		slices.SortStableFunc(row, func(a, b *gnode) int {
			return cmp.Or(cmp.Compare(a.order, b.order), strings.Compare(a.Job.WorkflowTask, b.Job.WorkflowTask))
		})
		g.place(row, boxH)
		g.Nodes = append(g.Nodes, row...)
	}
	for _, e := range d.Edges {
		p, c := byID[e.Parent], byID[e.Child]
		if p == nil || c == nil {
			continue
		}
		ge := gedge{D: arrow(p, c), Title: p.Job.WorkflowTask + " → " + c.Job.WorkflowTask}
		if e.OnFail == backend.DepFailDone {
			ge.Class, ge.Title = "any", ge.Title+" (runs however it ends)"
		}
		g.Edges = append(g.Edges, ge)
	}
	return g
}

// place puts a level's (or band's) boxes on lines below what is placed,
// perLine a line.
func (g *graph) place(row []*gnode, height int) {
	if len(row) == 0 {
		return
	}
	y := margin
	if g.Height > 0 {
		y = g.Height + gapY
	}
	for i, n := range row {
		if i > 0 && i%perLine == 0 {
			y += height + gapY/2 // a wrapped line of the same level
		}
		n.X, n.Y, n.H = margin+(i%perLine)*(boxW+gapX), y, height
		g.Width = max(g.Width, n.X+boxW+margin)
	}
	g.Height = y + height
}

// arrow is the path from the bottom of box p to the top of box c.
func arrow(p, c *gnode) string {
	x1, y1 := p.X+p.W/2, p.Y+p.H
	x2, y2 := c.X+c.W/2, c.Y
	dy := max((y2-y1)/2, 8)
	return fmt.Sprintf("M%d %dC%d %d %d %d %d %d", x1, y1, x1, y1+dy, x2, y2-dy, x2, y2-2)
}

// collapsedGraph draws a box per band of levels and kind, with its counts
// by state, and an arrow between two boxes when a task of one waits for a
// task of the other.
func (h *Handler) collapsedGraph(d *spool.WorkflowDetail, level map[int64]int, _ map[int64][]int64) *graph {
	g := &graph{Collapsed: true}
	for _, l := range level {
		g.Levels = max(g.Levels, l+1)
	}
	g.Band = max(1, (g.Levels+graphMaxRows-1)/graphMaxRows)
	type key struct {
		band int
		kind string
	}
	groups := map[key]*gnode{}
	kindsOf := map[int]map[string]int64{}
	for _, j := range d.Jobs {
		b := level[j.ID] / g.Band
		if kindsOf[b] == nil {
			kindsOf[b] = map[string]int64{}
		}
		kindsOf[b][j.Kind]++
	}
	// The graphMaxKinds-1 most common kinds of a band have a box each;
	// any further kinds share one.
	const other = "\x00other kinds"
	kept := map[int]map[string]bool{}
	for b, kinds := range kindsOf {
		if len(kinds) <= graphMaxKinds {
			continue
		}
		names := slices.Collect(maps.Keys(kinds))
		slices.SortFunc(names, func(x, y string) int { return cmp.Or(cmp.Compare(kinds[y], kinds[x]), strings.Compare(x, y)) })
		kept[b] = map[string]bool{}
		for _, k := range names[:graphMaxKinds-1] {
			kept[b][k] = true
		}
	}
	kindOf := func(b int, kind string) string {
		if k := kept[b]; k != nil && !k[kind] {
			return other
		}
		return kind
	}
	groupOf := make(map[int64]*gnode, len(d.Jobs))
	for _, j := range d.Jobs {
		b := level[j.ID] / g.Band
		k := key{b, kindOf(b, j.Kind)}
		n := groups[k]
		if n == nil {
			n = &gnode{W: boxW, H: boxHC, line: b, Kind: k.kind, Counts: map[backend.State]int64{}}
			if k.kind == other {
				n.Kind = "other kinds"
			}
			n.Level = strconv.Itoa(b * g.Band)
			if g.Band > 1 {
				n.Level += "–" + strconv.Itoa(min(b*g.Band+g.Band, g.Levels)-1)
			}
			groups[k] = n
		}
		n.Total++
		n.Counts[j.State]++
		groupOf[j.ID] = n
		if attention(j.State) && len(g.Attention) < graphAttention {
			g.Attention = append(g.Attention, j)
		}
	}
	rows := make([][]*gnode, (g.Levels+g.Band-1)/g.Band)
	for _, n := range groups {
		rows[n.line] = append(rows[n.line], n)
	}
	for _, row := range rows {
		slices.SortFunc(row, func(a, b *gnode) int { return cmp.Or(cmp.Compare(b.Total, a.Total), strings.Compare(a.Kind, b.Kind)) })
		g.place(row, boxHC)
		for _, n := range row {
			n.Label = cut("L"+n.Level+" "+n.Kind, 16) + " ×" + strconv.FormatInt(n.Total, 10)
			n.Title = fmt.Sprintf("level %s · %s · %d tasks: %s", n.Level, n.Kind, n.Total, n.CountText())
			n.Bars = bars(n)
		}
		g.Nodes = append(g.Nodes, row...)
		g.Groups = append(g.Groups, row...)
	}
	type pair struct{ p, c *gnode }
	arrows := map[pair]int{}
	var order []pair
	for _, e := range d.Edges {
		p, c := groupOf[e.Parent], groupOf[e.Child]
		if p == nil || c == nil || p == c {
			continue
		}
		k := pair{p, c}
		if arrows[k] == 0 {
			order = append(order, k)
		}
		arrows[k]++
	}
	for i, k := range order {
		if i == graphMaxArrows {
			g.MoreArrows = len(order) - i
			break
		}
		g.Edges = append(g.Edges, gedge{D: arrow(k.p, k.c),
			Title: fmt.Sprintf("%d dependencies: level %s %s → level %s %s", arrows[k], k.p.Level, k.p.Kind, k.c.Level, k.c.Kind)})
	}
	return g
}

// attention reports a state a collapsed graph lists tasks of.
func attention(s backend.State) bool {
	return s == spool.JobStateRunning || s == spool.JobStateDiscarded || s == spool.JobStateCancelled || s == spool.JobStateRetryable
}

// bars splits a group's box width among its states, in lifecycle order;
// every state present gets at least 2 units.
func bars(n *gnode) []gbar {
	var out []gbar
	x, width := 4, n.W-8
	for _, s := range backend.AllStates {
		c := n.Counts[s]
		if c == 0 {
			continue
		}
		w := max(2, int(int64(width)*c/n.Total))
		out = append(out, gbar{X: x, W: w, State: s, N: c})
		x += w
	}
	if len(out) > 0 {
		// The last bar ends at the box's edge, whatever rounding did.
		last := &out[len(out)-1]
		last.W = max(2, 4+width-last.X)
	}
	return out
}

// cut shortens s to n runes, with an ellipsis.
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
