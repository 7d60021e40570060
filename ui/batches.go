package ui

import (
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strconv"

	"github.com/spoolq/spool"
)

// batchesData is the batch list's data, or one batch's page.
type batchesData struct {
	Batches []*spool.Batch
	// Older links to the next page of the list ("": none).
	Older template.URL

	Batch     *spool.Batch
	Callbacks []batchCallback
	Members   []*spool.JobRow
	// Next links to the members after this page, First to the first
	// page ("" when this is it).
	Next, First template.URL
	// Unsettled counts members not counted final yet.
	Unsettled int
}

// batchCallback is one of a batch's callbacks and its job (nil when the
// job is gone: deleted, or cleaned up by retention).
type batchCallback struct {
	When string // "on success", …
	ID   int64
	Job  *spool.JobRow
}

// Done counts a batch's final members.
func (batchesData) Done(b *spool.Batch) int { return b.Completed + b.Discarded + b.Cancelled }

// Status says where a batch is.
func (batchesData) Status(b *spool.Batch) string { return workflowsData{}.Status(b) }

// batchesPage lists batches, newest first, pageSize a page.
func (h *Handler) batchesPage(w http.ResponseWriter, r *http.Request) {
	before, err := cursor(r.URL.Query().Get("before"))
	if err != nil {
		h.fail(w, r, &statusError{http.StatusBadRequest, "the page cursor is not a batch id"})
		return
	}
	bs, err := h.client.Batches(r.Context(), before, pageSize+1)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	d := &batchesData{Batches: bs}
	if len(bs) > pageSize {
		d.Batches = bs[:pageSize]
		d.Older = template.URL(h.opts.Prefix + "/batches?before=" + strconv.FormatInt(d.Batches[pageSize-1].ID, 10))
	}
	h.render(w, r, "batches", &page{Title: "Batches", Nav: "batches", Data: d})
}

// batchPage shows a batch's progress, its callbacks and a page of its
// members (?after= pages on in id order).
func (h *Handler) batchPage(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		h.fail(w, r, &statusError{http.StatusNotFound, fmt.Sprintf("%q is not a batch id", r.PathValue("id"))})
		return
	}
	after, err := cursor(r.URL.Query().Get("after"))
	if err != nil {
		h.fail(w, r, &statusError{http.StatusBadRequest, "the page cursor is not a job id"})
		return
	}
	ctx := r.Context()
	b, err := h.client.Batch(ctx, id)
	if err != nil {
		if errors.Is(err, spool.ErrBatchNotFound) {
			err = &statusError{http.StatusNotFound, err.Error()}
		}
		h.fail(w, r, err)
		return
	}
	d := &batchesData{Batch: b, Unsettled: max(0, b.Total-b.Completed-b.Discarded-b.Cancelled)}
	for _, cb := range []struct {
		when string
		id   int64
	}{{"on success", b.OnSuccess}, {"on failure", b.OnFailure}, {"on completion", b.OnComplete}} {
		if cb.id == 0 {
			continue
		}
		c := batchCallback{When: cb.when, ID: cb.id}
		if c.Job, err = h.client.JobGet(ctx, cb.id); err != nil && !errors.Is(err, spool.ErrNotFound) {
			h.fail(w, r, err)
			return
		}
		d.Callbacks = append(d.Callbacks, c)
	}
	members, err := h.client.BatchMembers(ctx, id, after, pageSize+1)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	base := h.opts.Prefix + "/batches/" + strconv.FormatInt(id, 10)
	if len(members) > pageSize {
		members = members[:pageSize]
		d.Next = template.URL(base + "?after=" + strconv.FormatInt(members[pageSize-1].ID, 10))
	}
	if after > 0 {
		d.First = template.URL(base)
	}
	d.Members = members
	h.render(w, r, "batches", &page{Title: "Batch " + strconv.FormatInt(id, 10), Nav: "batches", Data: d})
}

// batchAction retries a batch's discarded members.
func (h *Handler) batchAction(w http.ResponseWriter, r *http.Request) error {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return &statusError{http.StatusNotFound, fmt.Sprintf("%q is not a batch id", r.PathValue("id"))}
	}
	if r.PathValue("action") != "retry" {
		return &statusError{http.StatusNotFound, fmt.Sprintf("no batch action %q (retry)", r.PathValue("action"))}
	}
	if _, err := h.client.BatchRetry(r.Context(), id); err != nil {
		if errors.Is(err, spool.ErrBatchNotFound) {
			return &statusError{http.StatusNotFound, err.Error()}
		}
		return err
	}
	h.back(w, r, "")
	return nil
}
