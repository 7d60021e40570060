package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

// pageSize is how many jobs a page of the job list shows.
const pageSize = 50

// page is what every template gets.
type page struct {
	Title    string
	Nav      string // the menu entry to highlight
	Prefix   string
	CSRF     string
	ReadOnly bool
	Refresh  int // milliseconds; 0: no refresh
	// Self is the page's own URL, which live refresh fetches again.
	Self string
	Data any
	// Status is the page's HTTP status (0: 200). A page that answers an
	// error does not refresh: the same request would fail again.
	Status int
	// refreshEvery stretches the refresh interval of a page costly to
	// read (0 or 1: Options.Refresh).
	refreshEvery int
}

// parsePages parses each page template with the layout.
func parsePages() (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"time":   fmtTime,
		"timeP":  func(t *time.Time) string { return fmtTimeP(t) },
		"ago":    ago,
		"states": func() []backend.State { return backend.AllStates },
		"count":  func(c map[backend.State]int64, s backend.State) int64 { return c[s] },
		"finished": func(s backend.State) bool {
			return s == spool.JobStateCompleted || s == spool.JobStateDiscarded || s == spool.JobStateCancelled
		},
		"json": prettyJSON,
		"dict": dict,
		"add":  func(a, b int) int { return a + b },
	}
	out := map[string]*template.Template{}
	for _, name := range []string{"queues", "jobs", "job", "periodic", "limits", "workflows", "batches"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("spool ui: parse %s: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}

// dict makes a map of key, value pairs, to hand several values to a
// template.
func dict(kv ...any) (map[string]any, error) {
	if len(kv)%2 != 0 {
		return nil, fmt.Errorf("dict: odd number of arguments")
	}
	m := make(map[string]any, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		k, ok := kv[i].(string)
		if !ok {
			return nil, fmt.Errorf("dict: key %v is not a string", kv[i])
		}
		m[k] = kv[i+1]
	}
	return m, nil
}

// render writes a page: the whole document, or for a live refresh (htmx)
// only the part that changes.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, name string, p *page) {
	p.Prefix, p.ReadOnly, p.CSRF = h.opts.Prefix, h.opts.ReadOnly, h.csrfToken(w, r)
	if h.opts.Refresh > 0 && p.Status < 400 {
		p.Refresh = int(h.opts.Refresh/time.Millisecond) * max(1, p.refreshEvery)
	}
	p.Self = r.URL.RequestURI()
	var buf bytes.Buffer
	tmpl := "layout.html"
	if r.Header.Get("HX-Request") == "true" && r.Header.Get("HX-Target") == "live" {
		tmpl = "live"
	}
	if err := h.pages[name].ExecuteTemplate(&buf, tmpl, p); err != nil {
		h.fail(w, r, fmt.Errorf("render %s: %w", name, err))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if p.Status != 0 {
		w.WriteHeader(p.Status)
	}
	_, _ = w.Write(buf.Bytes())
}

// queueRow is one line of the queues page.
type queueRow struct {
	Name   string
	Counts map[backend.State]int64
	Total  int64
	Paused *time.Time
}

func (h *Handler) queuesPage(w http.ResponseWriter, r *http.Request) {
	counts, at, err := h.stats.get(r.Context(), firstWait)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	stats, paused := counts.stats, counts.paused
	if at.IsZero() {
		// Not counted yet: show nothing rather than zeros.
		h.render(w, r, "queues", &page{Title: "Queues", Nav: "queues", Data: queuesData{}})
		return
	}
	rows := map[string]*queueRow{}
	for _, s := range stats {
		q := &queueRow{Name: s.Queue, Counts: s.Counts}
		for _, n := range s.Counts {
			q.Total += n
		}
		rows[s.Queue] = q
	}
	for _, p := range paused {
		q := rows[p.Queue]
		if q == nil {
			q = &queueRow{Name: p.Queue, Counts: map[backend.State]int64{}}
			rows[p.Queue] = q
		}
		since := p.Since
		q.Paused = &since
	}
	for name := range h.client.QueueConfigs() {
		if rows[name] == nil {
			rows[name] = &queueRow{Name: name, Counts: map[backend.State]int64{}}
		}
	}
	list := make([]*queueRow, 0, len(rows))
	for _, q := range rows {
		list = append(list, q)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	h.render(w, r, "queues", &page{Title: "Queues", Nav: "queues", Data: queuesData{Queues: list, At: at}})
}

// queuesData is the queues page's data: the queues and when they were
// counted.
type queuesData struct {
	Queues []*queueRow
	At     time.Time
}

// throughputAPI serves the chart's data: finished jobs per minute over the
// last hour, as uPlot's columns (times in seconds, then one column per
// state), every minute present.
func (h *Handler) throughputAPI(w http.ResponseWriter, r *http.Request) {
	buckets, _, err := h.throughput.get(r.Context(), computeTimeout)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	end := time.Now().Truncate(time.Minute)
	start := end.Add(-59 * time.Minute)
	byStart := map[int64]backend.ThroughputBucket{}
	for _, b := range buckets {
		byStart[b.Start.Unix()] = b
	}
	cols := [4][]int64{}
	for t := start; !t.After(end); t = t.Add(time.Minute) {
		b := byStart[t.Unix()]
		cols[0] = append(cols[0], t.Unix())
		cols[1] = append(cols[1], b.Completed)
		cols[2] = append(cols[2], b.Discarded)
		cols[3] = append(cols[3], b.Cancelled)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"series": []string{"completed", "discarded", "cancelled"},
		"data":   cols,
	})
}

// jobsData is the job list page's data.
type jobsData struct {
	Filter       url.Values
	Queue, Kind  string
	State        string
	Since, Until string // datetime-local values, UTC
	Jobs         []*spool.JobRow
	// Older and Newer link to the next pages ("": none); built from
	// url.Values, so safe as URLs.
	Older, Newer template.URL
	Error        string
	// Searched, when set, says which ids a page filtered by kind read.
	Searched string
}

// dateLayout is the format of an <input type="datetime-local">.
const dateLayout = "2006-01-02T15:04"

func (h *Handler) jobsPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := &jobsData{Queue: q.Get("queue"), Kind: q.Get("kind"), State: q.Get("state"), Since: q.Get("since"), Until: q.Get("until")}
	p := &spool.JobListParams{Queue: d.Queue, Kind: d.Kind, Limit: pageSize + 1, Newest: true}
	var bad []string
	if d.State != "" {
		s := backend.State(d.State)
		if !s.Valid() {
			bad = append(bad, fmt.Sprintf("state %q is not a job state", d.State))
		} else {
			p.States = []backend.State{s}
		}
	}
	if d.Queue != "" {
		if err := spool.ValidateQueueName(d.Queue); err != nil {
			bad = append(bad, err.Error())
		}
	}
	if d.Kind != "" {
		// As an insert checks it: a kind no job can have is refused here
		// rather than by the database (PostgreSQL refuses invalid UTF-8
		// and NUL in a query's text).
		if err := spool.ValidateKind(d.Kind); err != nil {
			bad = append(bad, err.Error())
		}
	}
	for _, tb := range []struct {
		v   string
		dst *time.Time
	}{{d.Since, &p.CreatedAfter}, {d.Until, &p.CreatedBefore}} {
		if tb.v == "" {
			continue
		}
		t, err := time.Parse(dateLayout, tb.v)
		if err != nil {
			bad = append(bad, fmt.Sprintf("time %q is not YYYY-MM-DDTHH:MM", tb.v))
			continue
		}
		if t.Before(spool.MinRunAt) || t.After(spool.MaxRunAt) {
			// The times every backend can hold (MariaDB's DATETIME
			// begins with year 1000, SQLite's count with 1970).
			bad = append(bad, fmt.Sprintf("time %q is out of range %s..%s", tb.v,
				spool.MinRunAt.Format(dateLayout), spool.MaxRunAt.Format(dateLayout)))
			continue
		}
		*tb.dst = t
	}
	before, errB := cursor(q.Get("before"))
	after, errA := cursor(q.Get("after"))
	if errB != nil || errA != nil {
		bad = append(bad, "the page cursor is not a job id")
	}
	d.Filter = url.Values{}
	for _, k := range []string{"queue", "kind", "state", "since", "until"} {
		if v := q.Get(k); v != "" {
			d.Filter.Set(k, v)
		}
	}
	if len(bad) > 0 {
		d.Error = strings.Join(bad, "; ")
		h.render(w, r, "jobs", &page{Title: "Jobs", Nav: "jobs", Data: d, Status: http.StatusBadRequest})
		return
	}
	if after > 0 {
		// Newer page: the pageSize jobs just above after, read oldest
		// first from the cursor and shown newest first.
		p.Newest, p.AfterID = false, after
	} else {
		p.BeforeID = before
	}
	ctx := r.Context()
	var win window
	if !p.CreatedAfter.IsZero() || !p.CreatedBefore.IsZero() || d.Kind != "" {
		var err error
		if win, err = h.narrow(ctx, p, d.Kind != ""); err != nil {
			h.fail(w, r, err)
			return
		}
	}
	jobs, err := h.client.JobList(ctx, p)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	more := len(jobs) > pageSize
	if more {
		jobs = jobs[:pageSize]
	}
	if after > 0 {
		slices.Reverse(jobs)
	}
	d.Jobs = jobs
	if len(jobs) > 0 {
		if more || after > 0 {
			d.Older = h.pageURL(d.Filter, "before", jobs[len(jobs)-1].ID)
		}
		if before > 0 || (after > 0 && more) {
			d.Newer = h.pageURL(d.Filter, "after", jobs[0].ID)
		}
	}
	if win.limited && !more {
		// The page is not full because only a window of ids was read:
		// the next page reads on from the window's edge.
		d.Searched = fmt.Sprintf("jobs %d to %d", win.from, win.to)
		if after > 0 {
			if win.to < win.newest {
				d.Newer = h.pageURL(d.Filter, "after", win.to)
			}
		} else if win.from > win.oldest {
			d.Older = h.pageURL(d.Filter, "before", win.from)
		}
	}
	h.render(w, r, "jobs", &page{Title: "Jobs", Nav: "jobs", Data: d})
}

// scanWindow is how many ids one page of a list filtered by kind reads at
// most: no index leads with kind, so such a list reads the primary key,
// and without a window a rare kind is looked for in the whole table on
// every page (BENCHMARKS.md, "Decision: a kind filter reads a window of
// ids").
var scanWindow int64 = 100000 // a variable for the tests

// timeSlack widens the id range a time filter reads: ids grow with insert
// order, insert times with each transaction's start (PostgreSQL), so near a
// bound they may disagree by as long as a transaction inserting jobs lasts.
const timeSlack = time.Minute

// window is the id range a list was narrowed to.
type window struct {
	limited        bool  // a kind filter limited the ids read to [from, to]
	from, to       int64 // the range read
	oldest, newest int64 // the store's lowest and highest ids
}

// narrow turns a list's time bounds into id bounds, found by binary search
// over ids (a time filter alone read the table from the newest job down
// until the page was full: 0.2 s on PostgreSQL, 1.4–1.8 s on MariaDB with
// 10^6 jobs when few matched), and with a kind filter limits the ids read
// to scanWindow. The insert-time conditions stay in the list: the bounds
// only say where to read.
func (h *Handler) narrow(ctx context.Context, p *spool.JobListParams, byKind bool) (window, error) {
	var win window
	oldest, err := h.client.JobList(ctx, &spool.JobListParams{Limit: 1})
	if err != nil || len(oldest) == 0 {
		return win, err
	}
	newest, err := h.client.JobList(ctx, &spool.JobListParams{Limit: 1, Newest: true})
	if err != nil || len(newest) == 0 {
		return win, err
	}
	win.oldest, win.newest = oldest[0].ID, newest[0].ID
	if !p.CreatedAfter.IsZero() {
		id, err := h.firstInsertedFrom(ctx, p.CreatedAfter.Add(-timeSlack), win.oldest, win.newest)
		if err != nil {
			return win, err
		}
		p.AfterID = max(p.AfterID, id-1)
	}
	if !p.CreatedBefore.IsZero() {
		id, err := h.firstInsertedFrom(ctx, p.CreatedBefore.Add(timeSlack), win.oldest, win.newest)
		if err != nil {
			return win, err
		}
		if id <= win.newest && (p.BeforeID == 0 || id < p.BeforeID) {
			p.BeforeID = id
		}
	}
	if !byKind {
		return win, nil
	}
	if p.Newest {
		top := win.newest + 1
		if p.BeforeID != 0 {
			top = p.BeforeID
		}
		if floor := top - scanWindow; floor-1 > p.AfterID {
			p.AfterID = floor - 1
			win.limited, win.from, win.to = true, floor, top-1
		}
	} else if edge := p.AfterID + scanWindow + 1; p.AfterID < math.MaxInt64-scanWindow && (p.BeforeID == 0 || edge < p.BeforeID) {
		p.BeforeID = edge
		win.limited, win.from, win.to = true, p.AfterID+1, edge-1
	}
	return win, nil
}

// firstInsertedFrom returns the boundary id in [lo, hi+1] between the jobs
// inserted before t and those inserted at or after it (as ids grow with
// insert times): each step reads one job by primary key.
func (h *Handler) firstInsertedFrom(ctx context.Context, t time.Time, lo, hi int64) (int64, error) {
	hi++
	for lo < hi {
		mid := lo + (hi-lo)/2
		rows, err := h.client.JobList(ctx, &spool.JobListParams{AfterID: mid - 1, BeforeID: hi, Limit: 1})
		if err != nil {
			return 0, err
		}
		switch {
		case len(rows) == 0:
			hi = mid // no job between mid and hi
		case rows[0].CreatedAt.Before(t):
			lo = rows[0].ID + 1
		default:
			hi = min(hi, rows[0].ID)
			if rows[0].ID == mid {
				hi = mid
			}
		}
	}
	return lo, nil
}

func cursor(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad cursor %q", s)
	}
	return n, nil
}

// pageURL links to the job list with filter and a page cursor.
func (h *Handler) pageURL(filter url.Values, key string, id int64) template.URL {
	v := url.Values{}
	for k, vs := range filter {
		v[k] = vs
	}
	v.Set(key, strconv.FormatInt(id, 10))
	return template.URL(h.opts.Prefix + "/jobs?" + v.Encode())
}

// event is one line of a job's timeline.
type event struct {
	At    time.Time
	What  string
	Error string
	Trace string
}

// jobData is a job page's data.
type jobData struct {
	Job        *spool.JobRow
	Args       string
	Redacted   bool
	Timeline   []event
	CanRetry   bool
	CanCancel  bool
	CanDelete  bool
	AttemptsOf string
	// Durable is the job's steps, signals and wait (docs/durable.md);
	// Waiting says what a parked job waits for ("" when nothing).
	Durable *spool.JobDurable
	Waiting string
}

func (h *Handler) jobPage(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		h.fail(w, r, &statusError{http.StatusNotFound, fmt.Sprintf("%q is not a job id", r.PathValue("id"))})
		return
	}
	j, err := h.client.JobGet(r.Context(), id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	d := &jobData{Job: j, AttemptsOf: fmt.Sprintf("%d of %d", j.Attempt, j.MaxAttempts)}
	d.Args, d.Redacted = h.argsText(j)
	running := j.State == spool.JobStateRunning
	d.CanRetry = !running && j.State != spool.JobStateAvailable
	d.CanCancel = j.State != spool.JobStateCompleted && j.State != spool.JobStateDiscarded && j.State != spool.JobStateCancelled
	d.CanDelete = !running
	d.Timeline = timeline(j)
	if d.Durable, err = h.client.JobDurable(r.Context(), id); err != nil {
		h.fail(w, r, err)
		return
	}
	d.Waiting = waitingText(j, d.Durable)
	h.render(w, r, "job", &page{Title: fmt.Sprintf("Job %d", j.ID), Nav: "jobs", Data: d})
}

// argsText is the job's args as shown: indented, or redacted.
func (h *Handler) argsText(j *spool.JobRow) (string, bool) {
	if h.redact[j.Kind] {
		return "", true
	}
	args := j.Args
	if h.opts.RedactArgs != nil {
		if args = h.opts.RedactArgs(j.Kind, args); args == nil {
			return "", true
		}
	}
	return prettyJSON(args), false
}

// timeline lists what happened to a job, oldest first.
func timeline(j *spool.JobRow) []event {
	ev := []event{{At: j.CreatedAt, What: "inserted"}}
	if j.RunAt.After(j.CreatedAt.Add(time.Second)) && j.Attempt == 0 {
		ev = append(ev, event{At: j.RunAt, What: "due to run"})
	}
	for _, e := range j.Errors {
		ev = append(ev, event{At: e.At, What: fmt.Sprintf("attempt %d failed", e.Attempt), Error: e.Error, Trace: e.Trace})
	}
	if j.AttemptedAt != nil {
		ev = append(ev, event{At: *j.AttemptedAt, What: fmt.Sprintf("attempt %d started", j.Attempt)})
	}
	if j.State == spool.JobStateRetryable || j.State == spool.JobStateScheduled {
		ev = append(ev, event{At: j.RunAt, What: "runs again"})
	}
	sort.SliceStable(ev, func(a, b int) bool { return ev[a].At.Before(ev[b].At) })
	if j.FinalizedAt != nil {
		// Last whatever the clocks say: an attempt's error is stamped by
		// the worker's clock, the finish by the store's.
		ev = append(ev, event{At: *j.FinalizedAt, What: string(j.State)})
	}
	return ev
}

func (h *Handler) jobAction(w http.ResponseWriter, r *http.Request) error {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return &statusError{http.StatusNotFound, fmt.Sprintf("%q is not a job id", r.PathValue("id"))}
	}
	ctx := r.Context()
	switch r.PathValue("action") {
	case "retry":
		_, err = h.client.JobRetry(ctx, id)
	case "cancel":
		_, err = h.client.JobCancel(ctx, id)
	case "signal":
		err = h.sendSignal(r, id)
	case "delete":
		if _, err = h.client.JobDelete(ctx, id); err == nil {
			h.back(w, r, h.opts.Prefix+"/jobs")
			return nil
		}
	default:
		return &statusError{http.StatusNotFound, fmt.Sprintf("no job action %q (retry, cancel, signal, delete)", r.PathValue("action"))}
	}
	if err != nil {
		return err
	}
	h.back(w, r, "")
	return nil
}

func (h *Handler) queueAction(w http.ResponseWriter, r *http.Request) error {
	queue := r.PostFormValue("queue")
	var err error
	switch r.PathValue("action") {
	case "pause":
		err = h.client.QueuePause(r.Context(), queue)
	case "resume":
		err = h.client.QueueResume(r.Context(), queue)
	default:
		return &statusError{http.StatusNotFound, fmt.Sprintf("no queue action %q (pause, resume)", r.PathValue("action"))}
	}
	if err != nil {
		return err
	}
	h.back(w, r, "")
	return nil
}

// periodicRow is one periodic job: as the leader of the store's clients
// recorded it (Recorded), as the client that serves the dashboard defines
// it (Here), or both.
type periodicRow struct {
	Name, Schedule, Kind, Queue string
	// Next is the next slot: by this client's schedule when it defines
	// the job, else as last recorded (zero: none known).
	Next time.Time
	// Recorded is the store's record; nil when no leader recorded it yet.
	Recorded *spool.PeriodicRecord
	// Stale is true when no leader recorded it for PeriodicStaleAfter.
	Stale bool
	// Here is true when this client's config defines it.
	Here   bool
	Recent []*spool.JobRow
}

// periodicPage lists the periodic jobs recorded in the store, so that a
// dashboard served without the applications' config (spool ui) shows
// them, and those this client defines that no leader recorded yet.
func (h *Handler) periodicPage(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	recs, err := h.client.PeriodicRecords(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	byName := map[string]int{}
	rows := make([]periodicRow, 0, len(recs))
	for i := range recs {
		rec := &recs[i]
		byName[rec.Name] = len(rows)
		rows = append(rows, periodicRow{Name: rec.Name, Schedule: rec.Schedule, Queue: rec.Queue, Next: rec.NextSlot,
			Recorded: rec, Stale: spool.PeriodicStale(rec, now)})
	}
	for _, p := range h.client.PeriodicJobs() {
		i, ok := byName[p.Name]
		if !ok {
			i = len(rows)
			rows = append(rows, periodicRow{Name: p.Name})
		}
		row := &rows[i]
		row.Here, row.Schedule, row.Next, row.Queue = true, spool.DescribeSchedule(p.Schedule), p.Schedule.Next(now), spool.DefaultQueue
		if p.Opts != nil && p.Opts.Queue != "" {
			row.Queue = p.Opts.Queue
		}
		if args := p.Args(row.Next); args != nil {
			row.Kind = args.Kind()
			recent, err := h.client.JobList(r.Context(), &spool.JobListParams{Queue: row.Queue, Kind: row.Kind, Newest: true, Limit: 5})
			if err != nil {
				h.fail(w, r, err)
				return
			}
			row.Recent = recent
		}
	}
	slices.SortFunc(rows, func(a, b periodicRow) int { return strings.Compare(a.Name, b.Name) })
	h.render(w, r, "periodic", &page{Title: "Periodic jobs", Nav: "periodic", Data: rows})
}

// limitsRow is one queue's flow rules (when this client configures them)
// and its keys' current use.
type limitsRow struct {
	Queue string
	Flow  *spool.Flow
	Keys  []spool.FlowKeyUse
}

// limitsData is the limits page's data: the queues this client gives flow
// rules, and the queue asked for by name.
type limitsData struct {
	Queue string // ?queue=, "" if none
	Rows  []limitsRow
	Error string
}

// limitsPage shows the flow keys of the queues the serving client gives
// flow rules, and of any queue asked for with ?queue=. It does not look
// for keys in every queue: counting a queue's keys reads its pending jobs
// (0.2 s for 16,000 on PostgreSQL), too much to repeat for each queue at
// every refresh.
func (h *Handler) limitsPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	configs := h.client.QueueConfigs()
	d := &limitsData{Queue: r.URL.Query().Get("queue")}
	queues := map[string]bool{}
	for q, c := range configs {
		if c.Flow != nil {
			queues[q] = true
		}
	}
	if d.Queue != "" {
		if err := spool.ValidateQueueName(d.Queue); err != nil {
			d.Error = err.Error()
			h.render(w, r, "limits", &page{Title: "Limits", Nav: "limits", Data: d, Status: http.StatusBadRequest})
			return
		}
		queues[d.Queue] = true
	}
	for _, q := range slices.Sorted(maps.Keys(queues)) {
		keys, err := h.client.FlowKeys(ctx, q, 20)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		d.Rows = append(d.Rows, limitsRow{Queue: q, Flow: configs[q].Flow, Keys: keys})
	}
	h.render(w, r, "limits", &page{Title: "Limits", Nav: "limits", Data: d})
}

func fmtTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") }

func fmtTimeP(t *time.Time) string {
	if t == nil {
		return "–"
	}
	return fmtTime(*t)
}

// ago says how long ago (or in how long) t is, roughly.
func ago(t time.Time) string {
	d := time.Since(t)
	suffix := " ago"
	if d < 0 {
		d, suffix = -d, " from now"
	}
	switch {
	case d < time.Second:
		return "now"
	case d < time.Minute:
		return fmt.Sprintf("%ds%s", int(d.Seconds()), suffix)
	case d < time.Hour:
		return fmt.Sprintf("%dm%s", int(d.Minutes()), suffix)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%s", int(d.Hours()), suffix)
	default:
		return fmt.Sprintf("%dd%s", int(d.Hours()/24), suffix)
	}
}

// prettyJSON indents a JSON document for display ("–" for none), with the
// characters encoding/json escapes for HTML (<, >, &, U+2028, U+2029) shown
// as themselves: html/template escapes the page, and "\u003cscript\u003e"
// is not what the user wrote.
func prettyJSON(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return "–"
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return unescapeHTMLSafe(b.Bytes())
}

// htmlEscapes are the escapes encoding/json writes for HTML's sake, and the
// characters they stand for.
var htmlEscapes = map[string]string{`u003c`: "<", `u003e`: ">", `u0026`: "&", `u2028`: "\u2028", `u2029`: "\u2029"}

// unescapeHTMLSafe replaces, in valid JSON, the escapes of htmlEscapes with
// their characters; every other escape stays as it is. It reads escapes in
// order, so the text of an escaped backslash ("\\u003c") is left alone.
func unescapeHTMLSafe(doc []byte) string {
	var out strings.Builder
	out.Grow(len(doc))
	for i := 0; i < len(doc); i++ {
		if doc[i] != '\\' || i+1 >= len(doc) {
			out.WriteByte(doc[i])
			continue
		}
		if doc[i+1] == 'u' && i+6 <= len(doc) {
			if c, ok := htmlEscapes[strings.ToLower(string(doc[i+1:i+6]))]; ok {
				out.WriteString(c)
				i += 5
				continue
			}
		}
		out.WriteByte(doc[i])
		out.WriteByte(doc[i+1])
		i++
	}
	return out.String()
}

// workflowsData is the workflows page's data: the lists, or one workflow
// with its tasks by level.
type workflowsData struct {
	Workflows []*spool.WorkflowSummary
	Batches   []*spool.Batch
	Workflow  *spool.WorkflowDetail
	Graph     *graph
	// Levels are the tasks by level as text, for a graph drawn a box
	// per task.
	Levels [][]workflowTask
	// Failed counts the workflow's discarded and cancelled tasks.
	Failed int
	// MaxTasks and MaxEdges are the bounds of a graph drawn a box per
	// task.
	MaxTasks, MaxEdges int
}

// workflowTask is a task of the workflow shown, with the names of the
// tasks it waits for.
type workflowTask struct {
	Job   *spool.JobRow
	After string
}

// Summary prints a workflow's counts by state in lifecycle order.
func (workflowsData) Summary(w *spool.WorkflowSummary) string {
	var parts []string
	for _, s := range backend.AllStates {
		if n := w.Counts[s]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, s))
		}
	}
	if len(parts) == 0 {
		return "–"
	}
	return strings.Join(parts, ", ")
}

// Done counts a batch's final members.
func (workflowsData) Done(b *spool.Batch) int { return b.Completed + b.Discarded + b.Cancelled }

// Status says where a batch is.
func (workflowsData) Status(b *spool.Batch) string {
	switch {
	case b.FinishedAt != nil:
		return "finished " + ago(*b.FinishedAt)
	case b.Sealed:
		return "running"
	}
	return "open"
}

// Callbacks lists a batch's callback job ids.
func (workflowsData) Callbacks(b *spool.Batch) []int64 {
	var out []int64
	for _, id := range []int64{b.OnSuccess, b.OnFailure, b.OnComplete} {
		if id != 0 {
			out = append(out, id)
		}
	}
	return out
}

// workflowsPage lists the newest workflows and batches.
func (h *Handler) workflowsPage(w http.ResponseWriter, r *http.Request) {
	ws, err := h.client.Workflows(r.Context(), 0, 100)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	bs, err := h.client.Batches(r.Context(), 0, 100)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, "workflows", &page{Title: "Workflows and batches", Nav: "workflows", Data: &workflowsData{Workflows: ws, Batches: bs}})
}

// workflowPage shows one workflow as a graph (graph.go) and, when it is
// drawn a box per task, its tasks by level as text.
func (h *Handler) workflowPage(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		h.fail(w, r, &statusError{http.StatusNotFound, fmt.Sprintf("%q is not a workflow id", r.PathValue("id"))})
		return
	}
	d, err := h.client.Workflow(r.Context(), id)
	if err != nil {
		if errors.Is(err, spool.ErrWorkflowNotFound) {
			err = &statusError{http.StatusNotFound, err.Error()}
		}
		h.fail(w, r, err)
		return
	}
	g := h.buildGraph(d)
	data := &workflowsData{Workflow: d, Graph: g, MaxTasks: GraphMaxTasks, MaxEdges: GraphMaxEdges}
	for _, j := range d.Jobs {
		if j.State == spool.JobStateDiscarded || j.State == spool.JobStateCancelled {
			data.Failed++
		}
	}
	if !g.Collapsed {
		byID := map[int64]*spool.JobRow{}
		for _, j := range d.Jobs {
			byID[j.ID] = j
		}
		after := map[int64][]string{}
		for _, e := range d.Edges {
			if pj := byID[e.Parent]; pj != nil {
				after[e.Child] = append(after[e.Child], pj.WorkflowTask)
			}
		}
		// The graph's boxes are in level order, each level's in its
		// drawn order.
		for _, n := range g.Nodes {
			for len(data.Levels) <= n.line {
				data.Levels = append(data.Levels, nil)
			}
			data.Levels[n.line] = append(data.Levels[n.line], workflowTask{Job: n.Job, After: strings.Join(after[n.Job.ID], ", ")})
		}
	}
	p := &page{Title: "Workflow " + strconv.FormatInt(id, 10), Nav: "workflows", Data: data}
	if g.Collapsed {
		// Reading a big workflow whole costs the store more than any
		// other page: refresh it less often.
		p.refreshEvery = 5
	}
	h.render(w, r, "workflows", p)
}

// workflowAction cancels a workflow, or retries a finished one's
// discarded and cancelled tasks (Client.WorkflowRetry).
func (h *Handler) workflowAction(w http.ResponseWriter, r *http.Request) error {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return &statusError{http.StatusNotFound, fmt.Sprintf("%q is not a workflow id", r.PathValue("id"))}
	}
	switch r.PathValue("action") {
	case "cancel":
		_, err = h.client.WorkflowCancel(r.Context(), id)
	case "retry":
		_, err = h.client.WorkflowRetry(r.Context(), id)
	default:
		return &statusError{http.StatusNotFound, fmt.Sprintf("no workflow action %q (cancel, retry)", r.PathValue("action"))}
	}
	if errors.Is(err, spool.ErrWorkflowNotFound) {
		return &statusError{http.StatusNotFound, err.Error()}
	}
	if err != nil {
		return err
	}
	h.back(w, r, "")
	return nil
}
