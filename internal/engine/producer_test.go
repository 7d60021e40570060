package engine

import (
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
