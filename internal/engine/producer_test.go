package engine

import (
	"slices"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
)

// TestBufferReusesItsArray: claims pushed into a buffer that pop has
// emptied from its front land at the front of the same array, in claim
// order after the jobs still waiting, and the places those jobs left hold
// no row any more (a stale row would stay reachable for the collector).
func TestBufferReusesItsArray(t *testing.T) {
	p := &producer{}
	var next int64
	claim := func(n int) []*backend.JobRow {
		rows := make([]*backend.JobRow, n)
		for i := range rows {
			next++
			rows[i] = &backend.JobRow{ID: next}
		}
		return rows
	}
	now := time.Now()
	p.pushLocked(claim(8), now, now)
	array := p.bufferArray[:cap(p.bufferArray)]
	var popped []int64
	pop := func(n int) {
		for range n {
			popped = append(popped, p.pop().row.ID)
		}
	}
	pop(6)
	p.pushLocked(claim(5), now, now) // 2 waiting + 5 fit in the 8 places
	if &p.buffer[0] != &array[0] {
		t.Fatalf("the buffer moved to a new array (cap %d), want the first one (cap %d)", cap(p.buffer), cap(array))
	}
	for i, j := range p.buffer {
		if want := int64(7 + i); j.row.ID != want {
			t.Fatalf("buffer[%d] is job %d, want %d", i, j.row.ID, want)
		}
	}
	if tail := array[len(p.buffer)]; tail.row != nil {
		t.Fatalf("the place after the buffer still holds job %d", tail.row.ID)
	}
	pop(7)
	p.pushLocked(claim(20), now, now) // more than the array holds: a new one
	if cap(p.bufferArray) < 20 || &p.buffer[0] != &p.bufferArray[:1][0] {
		t.Fatalf("after a claim larger than the array: buffer of cap %d, array of cap %d; want both the new array's", cap(p.buffer), cap(p.bufferArray))
	}
	pop(20)
	for i, id := range popped {
		if id != int64(i+1) {
			t.Fatalf("pop %d gave job %d, want %d: claim order lost", i, id, i+1)
		}
	}
}

// TestTakenIDsDrop checks both of drop's ways, the scan for a few ids and
// the set for many: it keeps exactly the ids no remembered claim took, in
// order, and forgets claims past takenClaims.
func TestTakenIDsDrop(t *testing.T) {
	var taken takenIDs
	rows := func(ids ...int64) []*backend.JobRow {
		rs := make([]*backend.JobRow, len(ids))
		for i, id := range ids {
			rs[i] = &backend.JobRow{ID: id}
		}
		return rs
	}
	taken.add(rows(1, 2, 3)) // forgotten after takenClaims more claims
	for i := range takenClaims {
		taken.add(rows(int64(100+i), int64(200+i)))
	}
	for _, n := range []int{4, 20} { // below and above the scan's limit
		var ids, want []int64
		for i := range n {
			if i%2 == 0 {
				ids = append(ids, int64(100+i%takenClaims)) // taken
			} else {
				id := int64(1000 + i)
				ids, want = append(ids, id), append(want, id)
			}
		}
		ids = append(ids, 1, 2) // taken by a forgotten claim: kept
		want = append(want, 1, 2)
		if got := taken.drop(ids); !slices.Equal(got, want) {
			t.Errorf("%d ids: drop kept %v, want %v", n, got, want)
		}
	}
}
