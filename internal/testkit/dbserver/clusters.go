package dbserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
)

// Clusters are several PostgreSQL clusters started together, each under a
// temporary directory of its own and on a port of its own: the shards of
// a sharded backend's test or benchmark.
type Clusters struct {
	Servers []*Postgres
	dirs    []string
}

// StartClusters starts n clusters at once with options o, in directories
// named prefix followed by random characters in the temporary directory. On
// an error the ones started are stopped and every directory removed.
func StartClusters(ctx context.Context, n int, prefix string, o Options) (*Clusters, error) {
	c := &Clusters{Servers: make([]*Postgres, n), dirs: make([]string, n)}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dir, err := os.MkdirTemp("", prefix)
			if err != nil {
				errs[i] = err
				return
			}
			c.dirs[i] = dir
			if c.Servers[i], err = StartPostgresWith(ctx, dir, o); err != nil {
				errs[i] = fmt.Errorf("cluster %d: %w", i, err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	return c, nil
}

// URLs are the clusters' URLs, in order.
func (c *Clusters) URLs() []string {
	out := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		out[i] = s.URL()
	}
	return out
}

// Stop stops every cluster and removes their directories.
func (c *Clusters) Stop() error {
	var errs []error
	for i, s := range c.Servers {
		if s != nil {
			errs = append(errs, s.Stop())
		}
		if c.dirs[i] != "" {
			errs = append(errs, os.RemoveAll(c.dirs[i]))
		}
	}
	return errors.Join(errs...)
}
