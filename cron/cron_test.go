package cron_test

import (
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/cron"
)

var _ spool.Schedule = (*cron.Schedule)(nil)

func TestNextInZone(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	s := cron.MustParse("0 9 * * MON-FRI", berlin)
	// Friday 2026-03-27 10:00 UTC is 11:00 in Berlin: next is Monday 09:00,
	// after the switch to summer time (UTC+2), so 07:00 UTC.
	got := s.Next(time.Date(2026, 3, 27, 10, 0, 0, 0, time.UTC))
	want := time.Date(2026, 3, 30, 7, 0, 0, 0, time.UTC)
	if !got.Equal(want) {
		t.Fatalf("next = %v, want %v", got.UTC(), want)
	}
	// 02:30 does not exist in Berlin on 2026-03-29: that day is skipped.
	daily := cron.MustParse("30 2 * * *", berlin)
	got = daily.Next(time.Date(2026, 3, 28, 3, 0, 0, 0, berlin))
	if got.Day() != 30 || got.Hour() != 2 || got.Minute() != 30 {
		t.Fatalf("next 02:30 after a missing one = %v, want March 30 02:30", got)
	}
}

func TestParseErrors(t *testing.T) {
	for _, spec := range []string{"", "* * *", "61 * * * *", "@sometimes"} {
		if _, err := cron.Parse(spec, nil); err == nil {
			t.Errorf("Parse(%q) accepted", spec)
		}
	}
	if s, err := cron.Parse("@every 90s", nil); err != nil || !s.Next(time.Unix(0, 0)).Equal(time.Unix(90, 0)) {
		t.Errorf("@every 90s: %v, %v", s, err)
	}
}
