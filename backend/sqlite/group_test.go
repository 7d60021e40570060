package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"runtime"
	"testing"
)

// waitFollowers waits until n followWriteTx calls wait for the token.
func waitFollowers(st *store, n int) {
	for {
		st.groupMu.Lock()
		got := len(st.group)
		st.groupMu.Unlock()
		if got >= n {
			return
		}
		runtime.Gosched()
	}
}

// TestGroupedWritesShareTransaction: followWriteTx calls that wait while a
// takingWriteTx holds the token run in its transaction, after it, and
// commit with it; one that fails is rolled back to its savepoint alone and
// returns its own error.
func TestGroupedWritesShareTransaction(t *testing.T) {
	ctx := context.Background()
	be, err := OpenPath(ctx, filepath.Join(t.TempDir(), "g.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	st := be.st
	if err := st.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "CREATE TABLE g (who TEXT)")
		return err
	}); err != nil {
		t.Fatal(err)
	}

	insert := func(tx *sql.Tx, who string) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO g (who) VALUES (?)", who)
		return err
	}
	release := make(chan struct{})
	var leaderTx, okTx, failedTx *sql.Tx
	leaderDone := make(chan error, 1)
	inLeader := make(chan struct{})
	go func() {
		leaderDone <- st.takingWriteTx(ctx, func(tx *sql.Tx) error {
			leaderTx = tx
			close(inLeader)
			<-release
			return insert(tx, "leader")
		})
	}()
	<-inLeader
	errFailed := errors.New("follower failed")
	okDone, failedDone := make(chan error, 1), make(chan error, 1)
	go func() {
		okDone <- st.followWriteTx(ctx, func(tx *sql.Tx) error {
			okTx = tx
			return insert(tx, "ok")
		})
	}()
	waitFollowers(st, 1)
	go func() {
		failedDone <- st.followWriteTx(ctx, func(tx *sql.Tx) error {
			failedTx = tx
			if err := insert(tx, "failed"); err != nil {
				return err
			}
			return errFailed
		})
	}()
	waitFollowers(st, 2)
	close(release)
	if err := <-leaderDone; err != nil {
		t.Fatalf("leader: %v", err)
	}
	if err := <-okDone; err != nil {
		t.Fatalf("follower: %v", err)
	}
	if err := <-failedDone; !errors.Is(err, errFailed) {
		t.Fatalf("failed follower: %v, want its own error", err)
	}
	if okTx != leaderTx || failedTx != leaderTx {
		t.Errorf("followers ran in transactions of their own, not in the holder's")
	}
	rows, err := st.readers.QueryContext(ctx, "SELECT who FROM g ORDER BY rowid")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var who string
		if err := rows.Scan(&who); err != nil {
			t.Fatal(err)
		}
		got = append(got, who)
	}
	if len(got) != 2 || got[0] != "leader" || got[1] != "ok" {
		t.Errorf("rows %v, want [leader ok]: the failed follower rolled back alone", got)
	}
}

// TestGroupedWriteCancelledWhileWaiting: a followWriteTx whose context ends
// while it waits is withdrawn, never run.
func TestGroupedWriteCancelledWhileWaiting(t *testing.T) {
	ctx := context.Background()
	be, err := OpenPath(ctx, filepath.Join(t.TempDir(), "g.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	st := be.st
	release, inLeader := make(chan struct{}), make(chan struct{})
	leaderDone := make(chan error, 1)
	go func() {
		leaderDone <- st.writeTx(ctx, func(*sql.Tx) error {
			close(inLeader)
			<-release
			return nil
		})
	}()
	<-inLeader
	cctx, cancel := context.WithCancel(ctx)
	ran := false
	done := make(chan error, 1)
	go func() {
		done <- st.followWriteTx(cctx, func(*sql.Tx) error {
			ran = true
			return nil
		})
	}()
	waitFollowers(st, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled follower: %v, want context.Canceled", err)
	}
	close(release)
	if err := <-leaderDone; err != nil {
		t.Fatal(err)
	}
	if ran {
		t.Error("a withdrawn follower ran")
	}
	st.groupMu.Lock()
	left := len(st.group)
	st.groupMu.Unlock()
	if left != 0 {
		t.Errorf("%d followers left waiting", left)
	}
}

// TestFollowerHolderTakesNoFollowers: a followWriteTx that found the token
// free runs alone (a claim's rows are not held back by other writes); the
// follower waiting behind it runs in a transaction of its own.
func TestFollowerHolderTakesNoFollowers(t *testing.T) {
	ctx := context.Background()
	be, err := OpenPath(ctx, filepath.Join(t.TempDir(), "g.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	st := be.st
	release, inLeader := make(chan struct{}), make(chan struct{})
	var leaderTx, followerTx *sql.Tx
	leaderDone := make(chan error, 1)
	go func() {
		leaderDone <- st.followWriteTx(ctx, func(tx *sql.Tx) error {
			leaderTx = tx
			close(inLeader)
			<-release
			return nil
		})
	}()
	<-inLeader
	done := make(chan error, 1)
	go func() {
		done <- st.followWriteTx(ctx, func(tx *sql.Tx) error {
			followerTx = tx
			return nil
		})
	}()
	waitFollowers(st, 1)
	close(release)
	if err := <-leaderDone; err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if followerTx == leaderTx {
		t.Error("the follower ran in the transaction of a holder that takes none")
	}
}
