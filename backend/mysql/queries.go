package mysql

import (
	"context"
	"embed"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spoolq/spool/backend/sqltext"
)

// queries holds the fixed statements, built once per database from the
// templates in sql/ (one file per statement, named after its field:
// claimSelect in claim_select.sql). {{db}} is the quoted database; nothing else is spliced in
// from outside. Statements over a batch get their id lists appended at run
// time by inList: those are integers the backend itself formats with strconv
// (ids and fences it read from the database), never caller text. Every string
// value is bound.
//
// MySQL evaluates a single-table UPDATE's assignments left to right, each
// seeing the ones before it, while MariaDB's SIMULTANEOUS_ASSIGNMENT mode (a
// caller's session may use it) and multiple-table UPDATEs do not promise an
// order. Every UPDATE below is written so both readings agree: a column is
// never read after it is assigned, except by its own assignment.
type queries struct {
	listenHeads, listenHeadsSlow, newJobs    string
	newJobsGaps                              string
	listenHeadsLease, listenHeadsLeaseSlow   string
	lookerHold, lookerRelease, lookerInit    string
	wakeNote, wakeNotesNew, wakeNotesPrune   string
	getForUpdate, deleteJob, throughput      string
	claimSelect, claimUpdate, claimDue       string
	claimSelectIDs                           string
	claimLock                                string
	window, optimisticUpdate, optimisticWon  string
	lockForFinish, complete, deleteDone      string
	completedUnder                           string
	finishOther                              string
	heartbeat, heartbeatCheck, releaseClaim  string
	rescueSelect, rescueUpdate               string
	cleanupSelect, cleanup                   string
	insertHead, get, listHead, retry, cancel string
	uniqueHolder                             string
	cancelEvent, cancelEventsPrune           string
	cancelEventsRecent, record               string
	stats, leaderUpdate, leaderInsert        string
	leaderResign, schemaVersion              string
	queuePause, queueResume, queuePausedAll  string
	periodicRecord, periodicGet              string
	periodicList                             string
	flowLock, flowRunning                    string
	flowLockShared, flowLockStripe           string
	flowKeyNext, flowRates, flowSaveRate     string
	flowTakeAny, flowTakeKey, flowTakeBlock  string
	flowTakeStep, flowHead, flowTakeIDs      string
	flowUse, flowUseRates, flowPruneRates    string
	// The statements of durable steps and signals (sql/steps/) and of
	// debounced inserts and the finished-job feed (sql/await/).
	steps stepQueries
	await awaitQueries
}

// stepQueries are the statements of sql/steps/ (steps.go).
type stepQueries struct {
	held, heldMany, namesOf, stepRecord, stepRecordRows, stepRecordBatch, signalSent, jobWait, jobLock, signalInsert, signalWake string
	stepsOf, signalsOf, waitOf                                                                                                   string
}

// awaitQueries are the statements of sql/await/ (await.go); times are
// UTC, by the server's clock.
type awaitQueries struct {
	debounceMake, debounceLock, debounceFind, debounceMove string
	debounceSet, debounceCleanup, finishedSince            string
}

// jobColumns is the column list every JobRow scan reads, in scanJob's order.
const jobColumns = `id, queue, kind, args, state, priority, run_at, attempt, max_attempts, fence,
  leased_until, leased_by, created_at, attempted_at, finalized_at, errors, tags, metadata,
  coalesce(unique_key, ''), coalesce(unique_states, 0), output, coalesce(flow_key, ''),
  coalesce(wait_kind, ''), deps_left, has_dependents, coalesce(workflow_id, 0), coalesce(workflow_task, ''), coalesce(batch_id, 0)`

// claimColumns is the column list a claim reads (collectClaimed's order):
// jobColumns without those a claim sets or knows already. The queue is
// the claim's own; the state, the lease (leased_until, leased_by) and
// attempted_at are the claim's to write (markClaimed); a pending job has
// no finish time. Each column costs the server its formatting and the
// client its decoding, for every job claimed.
const claimColumns = `id, kind, args, priority, run_at, attempt, max_attempts, fence, created_at, errors, tags, metadata,
  coalesce(unique_key, ''), coalesce(unique_states, 0), output, coalesce(flow_key, ''),
  coalesce(wait_kind, ''), deps_left, has_dependents, coalesce(workflow_id, 0), coalesce(workflow_task, ''), coalesce(batch_id, 0)`

// nowJSON is the database's now as an RFC 3339 string, for error histories.
const nowJSON = `DATE_FORMAT(UTC_TIMESTAMP(6), '%Y-%m-%dT%H:%i:%s.%fZ')`

// The stored meaning of "no time" (schema 16): leased_until and
// attempted_at hold noTime, finalized_at holds neverTime, so that a claim
// and a finish overwrite a value of the same length (a row rewritten in
// place) instead of setting a NULL. neverTime is later than any finish, so
// ranges over finish times ("finalized_at < cutoff") skip unfinished rows
// as they skipped NULL; ranges reaching up to now bound themselves below
// it. scanJob maps both back to nil, and NULL as well.
const (
	noTime    = `'1000-01-01 00:00:00.000000'`
	neverTime = `'9999-12-31 23:59:59.999999'`
)

// pendingStates is the SQL list of pending states.
const pendingStates = `('available', 'scheduled', 'retryable')`

//go:embed sql/*.sql sql/fragments/*.sql sql/steps/*.sql sql/await/*.sql
var sqlFiles embed.FS

// buildQueries fills in the statements of sql/*.sql for a database. It
// fails only when a file and a field do not match (a broken build). A
// part two statements share is a file of sql/fragments, NAME.sql included
// as {{NAME}}.
func buildQueries(db string) (queries, error) {
	base := []string{"{{db}}", db, "{{cols}}", jobColumns, "{{claimcols}}", claimColumns, "{{nowjson}}", nowJSON, "{{pending}}", pendingStates,
		"{{never}}", neverTime}
	var cleanupDue, headsCols, leaseCol, slowCol string
	if err := sqltext.Load(sqlFiles, "sql/fragments", strings.NewReplacer(base...), map[string]*string{
		"cleanup_due":       &cleanupDue,
		"listen_heads_cols": &headsCols,
		"listen_lease_col":  &leaseCol,
		"listen_slow_col":   &slowCol,
	}); err != nil {
		return queries{}, err
	}
	r := strings.NewReplacer(append(base, "{{cleanup_due}}", cleanupDue, "{{listen_heads_cols}}", headsCols,
		"{{listen_lease_col}}", leaseCol, "{{listen_slow_col}}", slowCol)...)
	var q queries
	err := sqltext.Load(sqlFiles, "sql", r, map[string]*string{
		"claim_select":            &q.claimSelect,
		"claim_select_ids":        &q.claimSelectIDs,
		"flow_lock":               &q.flowLock,
		"flow_lock_shared":        &q.flowLockShared,
		"flow_lock_stripe":        &q.flowLockStripe,
		"flow_running":            &q.flowRunning,
		"flow_key_next":           &q.flowKeyNext,
		"flow_rates":              &q.flowRates,
		"flow_save_rate":          &q.flowSaveRate,
		"flow_take_any":           &q.flowTakeAny,
		"flow_take_key":           &q.flowTakeKey,
		"flow_take_block":         &q.flowTakeBlock,
		"flow_take_step":          &q.flowTakeStep,
		"flow_head":               &q.flowHead,
		"flow_take_ids":           &q.flowTakeIDs,
		"flow_use":                &q.flowUse,
		"flow_prune_rates":        &q.flowPruneRates,
		"flow_use_rates":          &q.flowUseRates,
		"claim_update":            &q.claimUpdate,
		"claim_due":               &q.claimDue,
		"claim_lock":              &q.claimLock,
		"window":                  &q.window,
		"queue_pause":             &q.queuePause,
		"queue_resume":            &q.queueResume,
		"queue_paused_all":        &q.queuePausedAll,
		"periodic_record":         &q.periodicRecord,
		"periodic_get":            &q.periodicGet,
		"periodic_list":           &q.periodicList,
		"optimistic_update":       &q.optimisticUpdate,
		"optimistic_won":          &q.optimisticWon,
		"lock_for_finish":         &q.lockForFinish,
		"completed_under":         &q.completedUnder,
		"complete":                &q.complete,
		"delete_done":             &q.deleteDone,
		"finish_other":            &q.finishOther,
		"heartbeat":               &q.heartbeat,
		"heartbeat_check":         &q.heartbeatCheck,
		"release_claim":           &q.releaseClaim,
		"rescue_select":           &q.rescueSelect,
		"rescue_update":           &q.rescueUpdate,
		"cleanup_select":          &q.cleanupSelect,
		"cleanup":                 &q.cleanup,
		"insert_head":             &q.insertHead,
		"unique_holder":           &q.uniqueHolder,
		"cancel_event":            &q.cancelEvent,
		"record":                  &q.record,
		"cancel_events_prune":     &q.cancelEventsPrune,
		"cancel_events_recent":    &q.cancelEventsRecent,
		"get":                     &q.get,
		"listen_heads":            &q.listenHeads,
		"listen_heads_slow":       &q.listenHeadsSlow,
		"new_jobs":                &q.newJobs,
		"new_jobs_gaps":           &q.newJobsGaps,
		"listen_heads_lease":      &q.listenHeadsLease,
		"listen_heads_lease_slow": &q.listenHeadsLeaseSlow,
		"looker_hold":             &q.lookerHold,
		"looker_release":          &q.lookerRelease,
		"looker_init":             &q.lookerInit,
		"wake_note":               &q.wakeNote,
		"wake_notes_new":          &q.wakeNotesNew,
		"wake_notes_prune":        &q.wakeNotesPrune,
		"get_for_update":          &q.getForUpdate,
		"delete":                  &q.deleteJob,
		"throughput":              &q.throughput,
		"list_head":               &q.listHead,
		"retry":                   &q.retry,
		"cancel":                  &q.cancel,
		"stats":                   &q.stats,
		"leader_update":           &q.leaderUpdate,
		"leader_insert":           &q.leaderInsert,
		"leader_resign":           &q.leaderResign,
		"schema_version":          &q.schemaVersion,
	})
	if err == nil {
		err = sqltext.Load(sqlFiles, "sql/steps", r, map[string]*string{
			"held":              &q.steps.held,
			"step_record":       &q.steps.stepRecord,
			"step_record_rows":  &q.steps.stepRecordRows,
			"step_record_batch": &q.steps.stepRecordBatch,
			"held_many":         &q.steps.heldMany,
			"names_of":          &q.steps.namesOf,
			"signal_sent":       &q.steps.signalSent,
			"job_wait":          &q.steps.jobWait,
			"job_lock":          &q.steps.jobLock,
			"signal_insert":     &q.steps.signalInsert,
			"signal_wake":       &q.steps.signalWake,
			"steps_of":          &q.steps.stepsOf,
			"signals_of":        &q.steps.signalsOf,
			"wait_of":           &q.steps.waitOf,
		})
	}
	if err == nil {
		err = sqltext.Load(sqlFiles, "sql/await", r, map[string]*string{
			"debounce_make":    &q.await.debounceMake,
			"debounce_lock":    &q.await.debounceLock,
			"debounce_find":    &q.await.debounceFind,
			"debounce_move":    &q.await.debounceMove,
			"debounce_set":     &q.await.debounceSet,
			"debounce_cleanup": &q.await.debounceCleanup,
			"finished_since":   &q.await.finishedSince,
		})
	}
	return q, err
}

// inList formats integers as a parenthesised SQL list: (1,2,3).
func inList(ids []int64) string {
	var (
		b   strings.Builder
		num [20]byte
	)
	b.Grow(len(ids)*8 + 2)
	b.WriteByte('(')
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(strconv.AppendInt(num[:0], id, 10)) // FormatInt allocated a string for each id of 100 or more
	}
	b.WriteByte(')')
	return b.String()
}

// leaseGuard is the condition that holds a row to its lease, appended
// after "id IN (ids)": " AND fence = f" when every lease has fence f,
// else " AND (fence = f1 AND id IN (…) OR fence = f2 AND id IN (…) …)",
// one arm per fence in the order first seen, each with its ids as they
// came. A row matches when its (id, fence) is one of the pairs, as with a
// row-constructor list "(id, fence) IN ((…), …)", which MariaDB evaluates
// row by row at a cost docs/mysql.md prices ("What a claim and a finish
// cost"); an integer IN list is searched by bisection. A drain's leases
// mostly share one fence.
// With more than leaseGuardArms distinct fences (jobs retried, snoozed or
// waiting many times, side by side), the arms would be tried one by one
// for every row, so the guard is the row list again.
func leaseGuard(ids []int64, fences []int32) string {
	first := make([]int32, 0, 2)
	for _, f := range fences {
		if !slices.Contains(first, f) {
			if len(first) == leaseGuardArms {
				return " AND (id, fence) IN " + leaseList(ids, fences)
			}
			first = append(first, f)
		}
	}
	if len(first) == 1 {
		return " AND fence = " + strconv.FormatInt(int64(first[0]), 10)
	}
	var b strings.Builder
	b.Grow(len(ids)*8 + len(first)*24 + 8)
	b.WriteString(" AND (")
	group := make([]int64, 0, len(ids))
	for k, f := range first {
		if k > 0 {
			b.WriteString(" OR ")
		}
		group = group[:0]
		for i, g := range fences {
			if g == f {
				group = append(group, ids[i])
			}
		}
		b.WriteString("fence = ")
		b.WriteString(strconv.FormatInt(int64(f), 10))
		b.WriteString(" AND id IN ")
		b.WriteString(inList(group))
	}
	b.WriteByte(')')
	return b.String()
}

// leaseGuardArms is the most fences leaseGuard groups ids by.
const leaseGuardArms = 8

// leaseList formats (id, fence) pairs as a SQL row list: ((1,2),(3,4)).
func leaseList(ids []int64, fences []int32) string {
	var b strings.Builder
	b.Grow(len(ids)*12 + 2)
	b.WriteByte('(')
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('(')
		b.WriteString(strconv.FormatInt(id, 10))
		b.WriteByte(',')
		b.WriteString(strconv.FormatInt(int64(fences[i]), 10))
		b.WriteByte(')')
	}
	b.WriteByte(')')
	return b.String()
}

// sqlTime formats a time as a DATETIME(6) literal value in UTC, to be bound
// and CAST: the driver's own conversion of time.Time depends on the
// connection's loc setting, which a caller's connection may set otherwise.
func sqlTime(t time.Time) string {
	return t.UTC().Format("2006-01-02 15:04:05.999999")
}

func micros(d time.Duration) int64 { return d.Microseconds() }

// queryIDs runs a query whose rows are one integer column and returns them.
func queryIDs(ctx context.Context, q DBTX, query string, args ...any) ([]int64, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}
