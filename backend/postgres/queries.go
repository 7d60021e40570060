package postgres

import (
	"embed"
	"fmt"
	"strings"

	"github.com/spoolq/spool/backend/sqltext"
)

// queries holds every statement the backend runs, built once per schema from
// the templates in sql/ (one file per statement, named after its field:
// releaseClaim in release_claim.sql). {{s}} is the quoted schema, {{cols}}
// and {{jcols}} the column lists below; nothing else is spliced in, every
// value is bound.
type queries struct {
	// claim moves jobs into lease rows (schema 12); claimInPlace updates
	// every job in place (the quick flow claim); claimSmall chooses rows
	// as they do and updates them in place, in a lighter statement (claims
	// expected to be small, and Options.Claims in place).
	claim, claimInPlace, claimSmall, releaseClaim, finish, heartbeat, rescue, cleanup string
	// The leased parts of finish and heartbeat, and the statements that
	// move jobs out of lease rows back into spool_jobs (spool_unlease).
	// completeLeasedKeep and completeLeasedDelete are the leased parts of
	// a completion-only finish that keeps or deletes completed jobs. These
	// four find their lease rows through the index of spans
	// (locateByIndex).
	finishLeased, heartbeatLeased, completeLeasedKeep, completeLeasedDelete string
	unleaseJobs, unleaseClaim, unleaseExpired, unleaseQueue                 string
	completeKeep, completeDelete, probeBelow                                string
	// completeKeepSmall and completeDeleteSmall complete small batches on
	// a cached generic plan (smallPlanSettings).
	completeKeepSmall, completeDeleteSmall string
	insert, insertUnique, now              string
	// insertWake and insertUniqueWake are insert.sql and insert_unique.sql
	// setting spool.wake for their transaction, by mode (deferWake).
	insertWake, insertUniqueWake            map[string]string
	get, list, retry, cancel, stats         string
	deleteJob, throughput                   string
	leaderElect, leaderResign               string
	schemaVersion                           string
	queuePause, queueResume, queuePausedAll string
	optimisticWindow, optimisticClaim       string
	bulkRetry, bulkCancel, bulkDelete       string
	record                                  string
	flow                                    flowQueries
}

// flowQueries are the statements of flow-controlled claims (flow.go).
type flowQueries struct {
	lock, lockShared, lockStripe, state, running, live, keys, rates, saveRates string
	takeKey, takeBlock, takeStep, takeKeyless                                  string
	use, useRates, pruneRates                                                  string
	// quick is flow_quick.sql's head joined to claim.sql (buildQueries).
	quick string
}

// jobColumns is the column list every JobRow scan reads, in scanJob's order.
const jobColumns = `id, queue, kind, args, state::text, priority, run_at, attempt, max_attempts, fence,
  leased_until, coalesce(leased_by, ''), created_at, attempted_at, finalized_at, errors, tags, metadata,
  coalesce(unique_key, ''), coalesce(unique_states, 0), output, coalesce(flow_key, '')`

// allColumns is spool_jobs' columns in table order, the column list of
// its rows and of spool_leased_jobs'.
const allColumns = `id, run_at, created_at, leased_until, attempted_at, finalized_at, fence, state, priority, attempt,
  max_attempts, queue, kind, leased_by, args, errors, tags, metadata, unique_key, unique_states, output, flow_key`

// jobColumnsJ is jobColumns qualified by the alias j, for UPDATE … RETURNING.
const jobColumnsJ = `j.id, j.queue, j.kind, j.args, j.state::text, j.priority, j.run_at, j.attempt, j.max_attempts,
  j.fence, j.leased_until, coalesce(j.leased_by, ''), j.created_at, j.attempted_at, j.finalized_at, j.errors, j.tags,
  j.metadata, coalesce(j.unique_key, ''), coalesce(j.unique_states, 0), j.output, coalesce(j.flow_key, '')`

//go:embed sql/*.sql
var sqlFiles embed.FS

// buildQueries fills in the statements of sql/*.sql for a schema. It fails
// only when a file and a field do not match (a broken build).
func buildQueries(schema string) (queries, error) {
	// The shared parts hold {{s}} and {{locate}}, which the replacer, in
	// one pass, leaves in the text it puts in: they are filled in first.
	part := strings.NewReplacer("{{s}}", schema, "{{locate}}", locateByIndex).Replace
	r := strings.NewReplacer("{{s}}", schema, "{{cols}}", jobColumns, "{{jcols}}", jobColumnsJ, "{{allcols}}", allColumns,
		"{{leased_hits}}", part(leasedHits), "{{leased_jobs}}", part(leasedJobs), "{{lease_done}}", part(leaseDone),
		"{{locate}}", locateByIndex)
	var q queries
	err := sqltext.Load(sqlFiles, "sql", r, map[string]*string{
		"claim":                  &q.claim,
		"claim_small":            &q.claimSmall,
		"release_claim":          &q.releaseClaim,
		"finish":                 &q.finish,
		"finish_leased":          &q.finishLeased,
		"heartbeat_leased":       &q.heartbeatLeased,
		"unlease_jobs":           &q.unleaseJobs,
		"unlease_claim":          &q.unleaseClaim,
		"unlease_expired":        &q.unleaseExpired,
		"unlease_queue":          &q.unleaseQueue,
		"probe_below":            &q.probeBelow,
		"complete_keep":          &q.completeKeep,
		"complete_delete":        &q.completeDelete,
		"complete_keep_small":    &q.completeKeepSmall,
		"complete_delete_small":  &q.completeDeleteSmall,
		"complete_leased_keep":   &q.completeLeasedKeep,
		"complete_leased_delete": &q.completeLeasedDelete,
		"heartbeat":              &q.heartbeat,
		"rescue":                 &q.rescue,
		"cleanup":                &q.cleanup,
		"insert":                 &q.insert,
		"insert_unique":          &q.insertUnique,
		"bulk_retry":             &q.bulkRetry,
		"record":                 &q.record,
		"bulk_cancel":            &q.bulkCancel,
		"bulk_delete":            &q.bulkDelete,
		"now":                    &q.now,
		"get":                    &q.get,
		"list":                   &q.list,
		"delete":                 &q.deleteJob,
		"throughput":             &q.throughput,
		"retry":                  &q.retry,
		"cancel":                 &q.cancel,
		"stats":                  &q.stats,
		"leader_elect":           &q.leaderElect,
		"leader_resign":          &q.leaderResign,
		"schema_version":         &q.schemaVersion,
		"optimistic_window":      &q.optimisticWindow,
		"optimistic_claim":       &q.optimisticClaim,
		"queue_pause":            &q.queuePause,
		"queue_resume":           &q.queueResume,
		"queue_paused_all":       &q.queuePausedAll,
		"flow_lock":              &q.flow.lock,
		"flow_lock_shared":       &q.flow.lockShared,
		"flow_lock_stripe":       &q.flow.lockStripe,
		"flow_state":             &q.flow.state,
		"flow_running":           &q.flow.running,
		"flow_live":              &q.flow.live,
		"flow_keys":              &q.flow.keys,
		"flow_rates":             &q.flow.rates,
		"flow_save_rates":        &q.flow.saveRates,
		"flow_take_key":          &q.flow.takeKey,
		"flow_take_block":        &q.flow.takeBlock,
		"flow_take_step":         &q.flow.takeStep,
		"flow_take_keyless":      &q.flow.takeKeyless,
		"flow_use":               &q.flow.use,
		"flow_use_rates":         &q.flow.useRates,
		"flow_prune_rates":       &q.flow.pruneRates,
		"flow_quick":             &q.flow.quick,
	})
	if err == nil && strings.Count(q.claim, leasing) != 2 {
		err = fmt.Errorf("load SQL: claim.sql no longer decides leasing in two places (%s)", leasing)
	}
	q.claim, q.claimInPlace = strings.ReplaceAll(q.claim, leasing, "true"), strings.ReplaceAll(q.claim, leasing, "false")
	if err == nil {
		// A quick flow claim counts running jobs in spool_jobs: its jobs
		// stay there.
		q.flow.quick, err = joinQuick(q.flow.quick, q.claimInPlace)
	}
	q.insertWake, q.insertUniqueWake = map[string]string{}, map[string]string{}
	for _, mode := range []string{WakeAfterCommit, WakeOff} {
		if err == nil {
			q.insertWake[mode], err = deferWake(q.insert, mode)
		}
		if err == nil {
			q.insertUniqueWake[mode], err = deferWake(q.insertUnique, mode)
		}
	}
	return q, err
}

// leasedHits begins the leased statements that need only the lease rows'
// ids and fences (heartbeat_leased.sql, complete_leased_delete.sql):
// input, the batch ($1 ids, $2 fences); locked, the lease rows holding
// any of $1 (locateByIndex), locked and read as locked; hit
// (lease, id, fence), the batch's jobs still in them under their fences.
// The rows' ids are unnested once, then joined with the input: a nested
// loop of the input per lease row re-read the input for every row.
const leasedHits = `input AS MATERIALIZED (
  SELECT * FROM unnest($1::bigint[], $2::integer[]) AS t(id, fence)
),
locked AS MATERIALIZED (
  SELECT l.id, l.done, l.ids, l.fences FROM {{s}}.spool_leases l
  WHERE {{locate}}
  ORDER BY l.id
  FOR NO KEY UPDATE
),
held AS MATERIALIZED (
  SELECT l.id AS lease, k.id, k.fence
  FROM locked l CROSS JOIN LATERAL unnest(l.ids, l.fences) AS k(id, fence)
  WHERE k.id <> ALL (l.done)
),
hit AS MATERIALIZED (
  SELECT h.lease, h.id, h.fence FROM held h JOIN input i ON i.id = h.id AND i.fence = h.fence
)`

// leasedJobs is the middle of the leased statements that write jobs back
// into spool_jobs (finish_leased.sql, complete_leased_keep.sql): locked,
// the lease rows holding any of $1 (locateByIndex), locked and
// read as locked; held, every job still in them, each row's array read
// once, with its lease row (lease, lease_at) and its running fence and
// attempt (run_fence, run_attempt). The statement joins held with its
// input: a nested loop of the input per lease row re-read the input for
// every row (13 ms of a 31 ms finish of 1,800 jobs from 30 rows).
const leasedJobs = `locked AS MATERIALIZED (
  SELECT l.id, l.claimed_at, l.done, l.ids, l.fences, l.jobs FROM {{s}}.spool_leases l
  WHERE {{locate}}
  ORDER BY l.id
  FOR NO KEY UPDATE
),
held AS MATERIALIZED (
  SELECT l.id AS lease, l.claimed_at AS lease_at, l.fences[j.ordinality] AS run_fence, j.attempt + 1 AS run_attempt, j.*
  FROM locked l CROSS JOIN LATERAL unnest(l.jobs) WITH ORDINALITY AS j
  WHERE j.id <> ALL (l.done)
)`

// leaseDone ends the statements that take jobs out of lease rows
// (finish_leased.sql and the leased completions): given the CTEs locked
// (the lease rows, locked, as read: id, done, ids) and hit (lease, id:
// the jobs that leave them), each lease row adds its jobs to done, or is
// deleted when they are its last.
const leaseDone = `marks AS (
  SELECT lease, array_agg(id) AS ids FROM hit GROUP BY lease
),
kept AS (
  UPDATE {{s}}.spool_leases l SET done = l.done || m.ids
  FROM marks m JOIN locked k ON k.id = m.lease
  WHERE l.id = m.lease AND cardinality(k.done) + cardinality(m.ids) < cardinality(k.ids)
),
gone AS (
  DELETE FROM {{s}}.spool_leases l
  USING marks m JOIN locked k ON k.id = m.lease
  WHERE l.id = m.lease AND cardinality(k.done) + cardinality(m.ids) >= cardinality(k.ids)
)`

// leased reports whether query is one of the leased statements, which find
// lease rows by the span index and run small batches on a generic plan
// (queryBatch).
func (q *queries) leased(query string) bool {
	switch query {
	case q.finishLeased, q.heartbeatLeased, q.completeLeasedKeep, q.completeLeasedDelete:
		return true
	}
	return false
}

// leasing marks claim.sql's choice of the jobs that go into lease rows.
const leasing = "{{leasing}}"

// locateByIndex ({{locate}}) finds the lease rows holding any of a batch's
// ids ($1) through the GiST index on the spans of their ids (schema 15:
// one entry per lease row, where a GIN index of the ids took one per job,
// about 2 µs of a claim's server time a job),
// then checks each candidate's ids against a hash of the batch's
// (PostgreSQL hashes = ANY of a constant array of 9 or more), so a row
// whose span only overlaps the batch's is neither locked nor read further.
// A batch of any size uses it: a span lookup does not grow with the batch
// as the GIN index's did, where a form that hashed the batch's ids against
// every lease row (0.47 ms for 2,000 ids in 45 rows, against 5.5 ms through
// the GIN index) served batches of more than genericPlanMax, until its
// sequential scan read every dead lease row of a drain (widePlanSettings).
const locateByIndex = `l.span && (SELECT int8range(min(x), max(x), '[]') FROM unnest($1::bigint[]) AS x)
    AND EXISTS (SELECT FROM unnest(l.ids) AS k(id) WHERE k.id = ANY ($1::bigint[]))`

// deferWake makes an insert statement set spool.wake to mode for its
// transaction, so that the insert trigger sends no notification (schema
// 10): set_config runs once, in a materialized CTE the insert's rows are
// joined with, before the statement's trigger fires.
func deferWake(insert, mode string) (string, error) {
	const tail = "\n) t\nORDER BY t.ord"
	if strings.Count(insert, tail) != 1 {
		return "", fmt.Errorf("load SQL: an insert statement no longer ends its rows with %q", tail)
	}
	head := "WITH spool_wake AS MATERIALIZED (SELECT set_config('spool.wake', '" + mode + "', true))\n"
	return head + strings.Replace(insert, tail, "\n) t CROSS JOIN spool_wake\nORDER BY t.ord", 1), nil
}

// joinQuick puts the head of a quick flow claim (flow_quick.sql, its WITH
// and CTEs) in front of the claim statement's own CTEs, and has the claim
// take the quick head's allowed count instead of its $2 (which the head
// then uses for the workers' part).
func joinQuick(head, claim string) (string, error) {
	rest, ok := strings.CutPrefix(claim, "WITH ")
	if !ok || !strings.Contains(rest, "$2") || strings.Contains(rest, "$8") {
		return "", fmt.Errorf("load SQL: claim.sql no longer fits flow_quick.sql (WITH first, $2 its count, no $8)")
	}
	return head + ",\n" + strings.ReplaceAll(rest, "$2", "(SELECT n FROM allowed)"), nil
}
