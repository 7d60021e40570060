package ui

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/memory"
)

type noteArgs struct{ kind string }

func (a noteArgs) Kind() string { return a.kind }

// TestNarrow: the binary search finds, for every job's insert time, the
// first job inserted then or later, across gaps in the ids; a kind filter
// reads a window of ids a page and its links go on past windows with no
// match until every job of the kind is listed, newest first, once.
func TestNarrow(t *testing.T) {
	ctx := context.Background()
	be := memory.New()
	c, err := spool.NewClient(be, &spool.Config{AllowUnknownKinds: true})
	if err != nil {
		t.Fatal(err)
	}
	var rare []int64
	for i := range 300 {
		kind := "common"
		if i%70 == 3 {
			kind = "rare"
		}
		res, err := c.Insert(ctx, noteArgs{kind}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if kind == "rare" {
			rare = append(rare, res.ID)
		}
		if i%7 == 5 { // gaps in the ids
			if _, err := c.JobDelete(ctx, res.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	h, err := New(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	all, err := c.JobList(ctx, &spool.JobListParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := all[0].ID, all[len(all)-1].ID
	for _, j := range all {
		got, err := h.firstInsertedFrom(ctx, j.CreatedAt, lo, hi)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range all {
			if (k.ID < got) != k.CreatedAt.Before(j.CreatedAt) {
				t.Fatalf("boundary %d for job %d's time: job %d inserted %s, job %d's time %s", got, j.ID, k.ID, k.CreatedAt, j.ID, j.CreatedAt)
			}
		}
	}
	if got, _ := h.firstInsertedFrom(ctx, all[len(all)-1].CreatedAt.Add(1), lo, hi); got != hi+1 {
		t.Fatalf("after the newest: %d, want %d", got, hi+1)
	}

	scanWindow = 40
	defer func() { scanWindow = 100000 }()
	srv := httptest.NewServer(h)
	defer srv.Close()
	row := regexp.MustCompile(`<tr data-job="(\d+)">`)
	older := regexp.MustCompile(`rel="next" href="([^"]+)"`)
	var listed []int64
	next := "/jobs?kind=rare"
	for pages := 0; next != ""; pages++ {
		if pages > 20 {
			t.Fatal("the pages do not end")
		}
		resp, err := http.Get(srv.URL + next)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range row.FindAllSubmatch(body, -1) {
			var id int64
			fmt.Sscan(string(m[1]), &id)
			listed = append(listed, id)
		}
		next = ""
		if m := older.FindSubmatch(body); m != nil {
			next = regexpAmp.ReplaceAllString(string(m[1]), "&")
		}
	}
	var want []int64
	for i := len(rare) - 1; i >= 0; i-- {
		if _, err := c.JobGet(ctx, rare[i]); err == nil {
			want = append(want, rare[i])
		}
	}
	if fmt.Sprint(listed) != fmt.Sprint(want) {
		t.Fatalf("kind rare listed %v over the windows, want %v", listed, want)
	}
}

var regexpAmp = regexp.MustCompile(`&amp;`)
