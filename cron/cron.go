// Package cron parses cron expressions into schedules for Spool's periodic
// jobs, with github.com/robfig/cron/v3's parser. It is a module of its own
// so that Spool's core needs no dependency.
//
//	s, err := cron.Parse("0 9 * * MON-FRI", berlin) // 09:00 on weekdays, Berlin time
//	cfg.PeriodicJobs = []spool.PeriodicJob{{Name: "report", Schedule: s, Args: …}}
package cron

import (
	"fmt"
	"time"

	robfig "github.com/robfig/cron/v3"
)

// Schedule is a parsed cron expression in a time zone. It implements
// spool.Schedule.
type Schedule struct {
	spec  string
	sched robfig.Schedule
	loc   *time.Location
}

// Parse reads a standard five-field expression (minute, hour, day of month,
// month, day of week) or a descriptor (@hourly, @daily, @weekly, @monthly,
// @yearly, @every 90s) and evaluates it in loc (UTC when nil). Across a
// daylight saving change, a time that does not exist is skipped and one
// that occurs twice runs once.
func Parse(spec string, loc *time.Location) (*Schedule, error) {
	if loc == nil {
		loc = time.UTC
	}
	s, err := robfig.ParseStandard(spec)
	if err != nil {
		return nil, fmt.Errorf("parse cron expression %q: %w", spec, err)
	}
	if ss, ok := s.(*robfig.SpecSchedule); ok {
		ss.Location = loc
	}
	return &Schedule{spec: spec, sched: s, loc: loc}, nil
}

// MustParse is Parse that panics on an error, for expressions written in
// the program's source.
func MustParse(spec string, loc *time.Location) *Schedule {
	s, err := Parse(spec, loc)
	if err != nil {
		panic(err)
	}
	return s
}

// Next returns the first time after t that the expression matches (the
// zero time if it never does again).
func (s *Schedule) Next(t time.Time) time.Time {
	return s.sched.Next(t.In(s.loc))
}

// String returns the expression and its zone.
func (s *Schedule) String() string { return s.spec + " (" + s.loc.String() + ")" }
