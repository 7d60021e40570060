package shard

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spoolq/spool/backend"
)

func init() { backend.Register(Open, "shard") }

// Open opens a sharded backend from a URL that lists the shards' URLs, in
// shard order, separated by semicolons, and options as name=value items
// among them:
//
//	shard://postgres://db1/app?sslmode=disable;postgres://db2/app?sslmode=disable
//	shard://placement=key;postgres://db1/app;postgres://db2/app
//	shard://queue.billing=1;postgres://db1/app;postgres://db2/app
//
// Options: placement=queue|key, and queue.NAME=N to pin queue NAME to shard
// N. Each shard's URL is opened with backend.Open, so its backend's package
// must be imported. On an error, the shards already opened are closed.
func Open(ctx context.Context, dsn string) (backend.Backend, error) {
	rest, ok := strings.CutPrefix(dsn, "shard://")
	if !ok {
		return nil, fmt.Errorf("open sharded backend: %q does not start with shard://", dsn)
	}
	opts := &Options{}
	var urls []string
	for _, item := range strings.Split(rest, ";") {
		item = strings.TrimSpace(item)
		switch name, value, isOpt := strings.Cut(item, "="); {
		case item == "":
		case strings.Contains(item, "://"):
			urls = append(urls, item)
		case !isOpt:
			return nil, fmt.Errorf("open sharded backend: %q is neither a database URL nor an option", item)
		case name == "placement" && value == "queue":
			opts.Placement = ByQueue
		case name == "placement" && value == "key":
			opts.Placement = ByKey
		case strings.HasPrefix(name, "queue.") && len(name) > len("queue."):
			n, err := strconv.Atoi(value)
			if err != nil {
				return nil, fmt.Errorf("open sharded backend: %s: shard %q is not a number", name, value)
			}
			if opts.Queues == nil {
				opts.Queues = map[string]int{}
			}
			opts.Queues[strings.TrimPrefix(name, "queue.")] = n
		default:
			return nil, fmt.Errorf("open sharded backend: unknown option %q (want placement=queue|key or queue.NAME=N)", item)
		}
	}
	if len(urls) == 0 {
		return nil, errors.New("open sharded backend: no shard URLs (shard://URL;URL…)")
	}
	shards := make([]backend.Backend, 0, len(urls))
	closeAll := func() {
		for _, s := range shards {
			_ = s.Close()
		}
	}
	for i, u := range urls {
		if strings.HasPrefix(u, "shard://") {
			closeAll()
			return nil, fmt.Errorf("open sharded backend: shard %d is itself sharded", i)
		}
		be, err := backend.Open(ctx, u)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("open shard %d: %w", i, err)
		}
		shards = append(shards, be)
	}
	b, err := New(shards, opts)
	if err != nil {
		closeAll()
		return nil, err
	}
	return b, nil
}
