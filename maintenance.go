package spool

import (
	"context"
	"time"

	"github.com/spoolq/spool/backend"
)

// leaderName is the election that decides which client runs maintenance.
const leaderName = "maintenance"

// maintenanceLoop elects a leader among all clients of the store; the leader
// rescues jobs whose lease ended and deletes finished jobs past retention.
func (c *Client) maintenanceLoop() {
	ctx := c.servicesCtx
	cfg := &c.config
	ttl := max(cfg.LeaseDuration, 5*time.Second)
	tick := min(cfg.RescueInterval, ttl/3)
	t := time.NewTicker(tick)
	defer t.Stop()
	var (
		leader      bool
		nextElect   time.Time
		nextRescue  time.Time
		nextCleanup time.Time
	)
	for {
		now := time.Now()
		if !now.Before(nextElect) {
			ok, err := c.backend.LeaderElect(ctx, &backend.LeaderElectParams{Name: leaderName, ClientID: cfg.ClientID, TTL: ttl})
			switch {
			case err != nil:
				if ctx.Err() != nil {
					return
				}
				c.logger.Warn("spool: leader election failed", "error", err)
				leader = false
			case ok != leader:
				c.logger.Info("spool: maintenance leadership changed", "leader", ok)
				leader = ok
			}
			nextElect = now.Add(ttl / 3)
		}
		if leader && !now.Before(nextRescue) {
			c.rescue(ctx)
			nextRescue = now.Add(cfg.RescueInterval)
		}
		if leader && !now.Before(nextCleanup) {
			c.cleanup(ctx)
			nextCleanup = now.Add(cfg.CleanupInterval)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (c *Client) rescue(ctx context.Context) {
	const batch = 1000
	for ctx.Err() == nil {
		res, err := c.backend.JobRescue(ctx, &backend.JobRescueParams{Max: batch})
		if err != nil {
			if ctx.Err() == nil {
				c.logger.Warn("spool: rescue failed", "error", err)
			}
			return
		}
		if n := res.Retried + res.Discarded; n > 0 {
			c.logger.Info("spool: rescued jobs whose lease ended", "retried", res.Retried, "discarded", res.Discarded)
		}
		if res.Retried+res.Discarded < batch {
			return
		}
	}
}

func (c *Client) cleanup(ctx context.Context) {
	cfg := &c.config
	age := func(d time.Duration) time.Duration { return max(d, 0) }
	p := &backend.JobCleanupParams{
		CompletedAge: age(cfg.CompletedRetention),
		DiscardedAge: age(cfg.DiscardedRetention),
		CancelledAge: age(cfg.CancelledRetention),
		Max:          10000,
	}
	for ctx.Err() == nil {
		n, err := c.backend.JobCleanup(ctx, p)
		if err != nil {
			if ctx.Err() == nil {
				c.logger.Warn("spool: cleanup failed", "error", err)
			}
			return
		}
		if n < p.Max {
			return
		}
	}
}
