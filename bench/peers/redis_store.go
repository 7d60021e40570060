//go:build !riversqlite

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// asynqRedisDB is the database of the shared Redis the asynq runs use:
// asynq's keys carry a fixed "asynq:" prefix, so a run is isolated by a
// database of its own, emptied before and after.
const asynqRedisDB = 13

// newRedis returns the shared Redis's asynqRedisDB, emptied. It refuses a
// database that holds keys other than asynq's: it is not the benchmark's
// to delete.
func (m *storeMaker) newRedis(ctx context.Context, name string) (*freshStore, error) {
	if m.redisAddr == "" {
		return nil, errors.New("redis store: no Redis address (--redis-addr)")
	}
	u := "redis://" + m.redisAddr + "/" + strconv.Itoa(asynqRedisDB)
	if err := emptyAsynqDB(ctx, u); err != nil {
		return nil, err
	}
	return &freshStore{URL: u, Name: name + " (redis db " + strconv.Itoa(asynqRedisDB) + ")",
		drop: func(ctx context.Context) error { return emptyAsynqDB(ctx, u) }}, nil
}

// emptyAsynqDB deletes every key of the Redis database at u, after checking
// that all are asynq's.
func emptyAsynqDB(ctx context.Context, u string) error {
	opt, err := redis.ParseURL(u)
	if err != nil {
		return fmt.Errorf("redis store: %w", err)
	}
	c := redis.NewClient(opt)
	defer c.Close()
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, "*", 1000).Result()
		if err != nil {
			return fmt.Errorf("redis store %s: %w", u, err)
		}
		for _, k := range keys {
			if !strings.HasPrefix(k, "asynq:") {
				return fmt.Errorf("redis store %s: holds key %q, not asynq's: not emptying it (pass another --redis-addr)", u, k)
			}
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	if err := c.FlushDB(ctx).Err(); err != nil {
		return fmt.Errorf("redis store %s: %w", u, err)
	}
	return nil
}

// newDurableRedis starts a Redis server of its own for one run, as durable
// as PostgreSQL's default: every write appended to its log and fsynced
// before the reply (--appendonly yes --appendfsync always), no snapshots.
// Its data lives in a fresh directory; the drop stops it and removes that.
func (m *storeMaker) newDurableRedis(ctx context.Context, name string) (*freshStore, error) {
	dir, err := os.MkdirTemp(m.sqliteDir, name+"_")
	if err != nil {
		return nil, fmt.Errorf("durable redis: %w", err)
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("durable redis: %w", err)
	}
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--appendonly", "yes", "--appendfsync", "always", "--save", "", "--daemonize", "no", "--logfile", filepath.Join(dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("durable redis: start redis-server: %w", err)
	}
	stop := func(context.Context) error {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("remove %s: %w", dir, err)
		}
		return nil
	}
	u := (&url.URL{Scheme: "redis", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Path: "/0"}).String()
	opt, _ := redis.ParseURL(u)
	c := redis.NewClient(opt)
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := c.Ping(ctx).Err()
		if err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			_ = stop(ctx)
			return nil, fmt.Errorf("durable redis on port %d did not answer: %w: %s", port, err, truncate(string(log), 500))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return &freshStore{URL: u, Name: dir, drop: stop}, nil
}

// freePort returns a loopback TCP port nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
