package cli

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Progress draws the progress of a counted task on a stream (stderr). On a
// terminal it redraws one line about ten times a second with \r: a bar,
// done/total, percent and the current rate. Elsewhere (a file, a pipe, a
// test buffer) it prints a plain line every second. Create it with
// StartProgress and end it with Stop.
type Progress struct {
	w        io.Writer
	label    string
	unit     string
	total    int64
	terminal bool
	current  func() int64

	start   time.Time
	samples []progressSample // the last second of samples, for the rate
	stopCh  chan struct{}
	done    chan struct{}
	once    sync.Once
}

type progressSample struct {
	at time.Time
	n  int64
}

// progressBarWidth is the width of the bar in characters.
const progressBarWidth = 30

// StartProgress starts drawing the progress of a task of total units whose
// done count current returns (it is called from another goroutine). unit
// names what is counted ("jobs"). Pass io.Discard as w to draw nothing.
func StartProgress(w io.Writer, terminal bool, label, unit string, total int64, current func() int64) *Progress {
	p := &Progress{
		w: w, label: label, unit: unit, total: total, terminal: terminal, current: current,
		start:  time.Now(),
		stopCh: make(chan struct{}),
		done:   make(chan struct{}),
	}
	interval := time.Second
	if terminal {
		interval = 100 * time.Millisecond
	}
	go p.run(interval)
	return p
}

func (p *Progress) run(interval time.Duration) {
	defer close(p.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-p.stopCh:
			return
		case now := <-t.C:
			p.draw(now, p.current())
		}
	}
}

// Stop stops drawing and prints the final state on a line of its own. It is
// safe to call more than once.
func (p *Progress) Stop() {
	p.once.Do(func() {
		close(p.stopCh)
		<-p.done
		n := p.current()
		elapsed := time.Since(p.start)
		avg := Rate(n, elapsed)
		if p.terminal {
			fmt.Fprintf(p.w, "\r%s %s in %.2fs, %s %s/s\x1b[K\n", p.prefix(n), p.counts(n), elapsed.Seconds(), HumanInt(avg), p.unit)
		} else {
			fmt.Fprintf(p.w, "%s: %s in %.2fs, %s %s/s\n", p.label, p.counts(n), elapsed.Seconds(), HumanInt(avg), p.unit)
		}
	})
}

// draw records a sample and draws the current state.
func (p *Progress) draw(now time.Time, n int64) {
	p.samples = append(p.samples, progressSample{at: now, n: n})
	// Keep one sample at least a second old as the base of the rate.
	for len(p.samples) > 2 && now.Sub(p.samples[1].at) >= time.Second {
		p.samples = p.samples[1:]
	}
	base := progressSample{at: p.start}
	if len(p.samples) > 1 {
		base = p.samples[0]
	}
	cur := Rate(n-base.n, now.Sub(base.at))
	if p.terminal {
		fmt.Fprintf(p.w, "\r%s %s, %s %s/s\x1b[K", p.prefix(n), p.counts(n), HumanInt(cur), p.unit)
	} else {
		fmt.Fprintf(p.w, "%s: %s, %s %s/s\n", p.label, p.counts(n), HumanInt(cur), p.unit)
	}
}

// prefix is the label and the bar.
func (p *Progress) prefix(n int64) string {
	filled := 0
	if p.total > 0 {
		filled = int(min(n, p.total) * progressBarWidth / p.total)
	}
	return fmt.Sprintf("%-7s [%s%s]", p.label, strings.Repeat("#", filled), strings.Repeat(".", progressBarWidth-filled))
}

// counts is "done/total (percent)".
func (p *Progress) counts(n int64) string {
	pct := 100.0
	if p.total > 0 {
		pct = 100 * float64(n) / float64(p.total)
	}
	return fmt.Sprintf("%s/%s %5.1f%%", HumanInt(float64(n)), HumanInt(float64(p.total)), pct)
}

// Rate returns n per second over d, 0 for an empty interval.
func Rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// HumanInt formats v rounded to an integer with thousands separators.
func HumanInt(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
