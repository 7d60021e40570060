package postgres

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"reflect"
	"slices"
	"strings"

	"github.com/spoolq/spool/backend/sqltext"
)

// queries holds every statement the backend runs, built once per schema
// from sql/ (one file per statement, named after its field: releaseClaim in
// release_claim.sql), each as it is sent. One mechanism fills a file in:
// {{NAME}} is the fragment sql/fragments/NAME.sql (a shared part: a column
// list, the lease rows' lookup, the claim's writes), itself filled in the
// same way, and {{s}} the quoted schema, the one value known only at run
// time. Nothing else is spliced in; every value is bound. TestGolden
// holds every statement as sent, in testdata/.
type queries struct {
	// claim moves jobs into lease rows (schema 12); claimInPlace updates
	// every job in place (Options.Claims in place); claimSmall chooses rows
	// as they do and updates them in place, in a lighter statement (claims
	// expected to be small, and Options.Claims in place).
	claim, claimInPlace, claimSmall, releaseClaim, finish, heartbeat, rescue, cleanup string
	// claimLock serialises the claims of a queue (Options.ClaimLock).
	claimLock string
	// The leased parts of finish and heartbeat, and the statements that
	// move jobs out of lease rows back into spool_jobs (spool_unlease).
	// completeLeasedKeep and completeLeasedDelete are the leased parts of
	// a completion-only finish that keeps or deletes completed jobs. These
	// four find their lease rows through the index of spans
	// (fragments/locate.sql).
	finishLeased, heartbeatLeased, completeLeasedKeep, completeLeasedDelete string
	// completeLeasedKeepSteps is completeLeasedKeep writing the step
	// records the completions carry (backend.OutcomeStepWriter).
	completeLeasedKeepSteps                                 string
	unleaseJobs, unleaseClaim, unleaseExpired, unleaseQueue string
	completeKeep, completeDelete, probeBelow                string
	// completeKeepSmall and completeDeleteSmall complete small batches on
	// a cached generic plan (smallPlanSettings).
	completeKeepSmall, completeDeleteSmall string
	insert, insertUnique, now              string
	// insertWake and insertUniqueWake are insert.sql and insert_unique.sql
	// setting spool.wake for their transaction, by mode
	// (insert_wake_MODE.sql, insert_unique_wake_MODE.sql).
	insertWake, insertUniqueWake map[string]string
	// insertWakeNow is insert_wake_after.sql notifying in its own
	// transaction (insert_wake_now.sql), channel as $11.
	insertWakeNow                           string
	get, list, retry, cancel, stats         string
	deleteJob, throughput                   string
	leaderElect, leaderResign               string
	schemaVersion                           string
	queuePause, queueResume, queuePausedAll string
	optimisticWindow, optimisticClaim       string
	bulkRetry, bulkCancel, bulkDelete       string
	record                                  string
	periodicRecord, periodicList            string
	flow                                    flowQueries
	// The statements of workflows and batches (sql/workflow/), of durable
	// steps and signals (sql/steps/), and of debounced inserts and the
	// finished-job feed (sql/await/).
	wf    workflowQueries
	steps stepQueries
	await awaitQueries
}

// workflowQueries are the statements of sql/workflow/ (workflow.go).
type workflowQueries struct {
	finishDeps, settleParents, settleChildren, batchCount, batchFinish, release    string
	finishDepsLeased, completeDepsLeased, workflowUnlease                          string
	dropCallback, batchCallbacks, workflowInsert, nextIDs, insertTasks, depsInsert string
	insertTasksKeyless                                                             string
	workflowSummary, workflowGet, workflowJobs, workflowEdges, workflowCancel      string
	dependencies, batchInsert, batchTotal, batchLock, batchSeal, batchGet          string
	batchList, batchMemberList, unsettled, prune                                   string
	workflowLock, workflowStates, workflowRetry                                    string
}

// stepQueries are the statements of sql/steps/ (steps.go).
type stepQueries struct {
	stepRecord, stepRecordMany, held, signalLock, signalSent, jobWait, signal string
	stepsOf, signalsOf, waitOf, recordsGone                                   string
	orphans                                                                   string
}

// awaitQueries are the statements of sql/await/ (await.go).
type awaitQueries struct {
	debounceLock, debounceMove, debounceSet, debounceCleanup, finishedSince string
}

// flowQueries are the statements of flow-controlled claims (flow.go).
type flowQueries struct {
	lock, lockShared, lockStripe, state, running, live, keys, rates, saveRates string
	takeKey, takeBlock, takeStep, takeKeyless                                  string
	use, useRates, pruneRates                                                  string
	// quick is the claim of a flow under limits (flow_quick.sql).
	quick string
}

//go:embed sql/*.sql sql/fragments/*.sql sql/workflow/*.sql sql/steps/*.sql sql/await/*.sql
var sqlFiles embed.FS

// buildQueries fills in the statements of sql/*.sql for a schema. It fails
// only when a file and a field do not match or a file names a fragment
// that is not there (a broken build).
func buildQueries(schema string) (queries, error) {
	return loadQueries(sqlFiles, schema)
}

// loadQueries is buildQueries reading sql/ from fsys.
func loadQueries(fsys fs.FS, schema string) (queries, error) {
	r, err := fragments(fsys, schema)
	if err != nil {
		return queries{}, err
	}
	var q queries
	wake := map[string]*string{}
	for _, mode := range []string{WakeAfterCommit, WakeOff} {
		wake[mode], wake["unique_"+mode] = new(string), new(string)
	}
	err = sqltext.Load(fsys, "sql", r, map[string]*string{
		"claim":                      &q.claim,
		"claim_in_place":             &q.claimInPlace,
		"claim_small":                &q.claimSmall,
		"claim_lock":                 &q.claimLock,
		"release_claim":              &q.releaseClaim,
		"finish":                     &q.finish,
		"finish_leased":              &q.finishLeased,
		"heartbeat_leased":           &q.heartbeatLeased,
		"unlease_jobs":               &q.unleaseJobs,
		"unlease_claim":              &q.unleaseClaim,
		"unlease_expired":            &q.unleaseExpired,
		"unlease_queue":              &q.unleaseQueue,
		"probe_below":                &q.probeBelow,
		"complete_keep":              &q.completeKeep,
		"complete_delete":            &q.completeDelete,
		"complete_keep_small":        &q.completeKeepSmall,
		"complete_delete_small":      &q.completeDeleteSmall,
		"complete_leased_keep":       &q.completeLeasedKeep,
		"complete_leased_keep_steps": &q.completeLeasedKeepSteps,
		"complete_leased_delete":     &q.completeLeasedDelete,
		"heartbeat":                  &q.heartbeat,
		"rescue":                     &q.rescue,
		"cleanup":                    &q.cleanup,
		"insert":                     &q.insert,
		"insert_unique":              &q.insertUnique,
		"bulk_retry":                 &q.bulkRetry,
		"record":                     &q.record,
		"bulk_cancel":                &q.bulkCancel,
		"bulk_delete":                &q.bulkDelete,
		"now":                        &q.now,
		"get":                        &q.get,
		"list":                       &q.list,
		"delete":                     &q.deleteJob,
		"throughput":                 &q.throughput,
		"retry":                      &q.retry,
		"cancel":                     &q.cancel,
		"stats":                      &q.stats,
		"leader_elect":               &q.leaderElect,
		"leader_resign":              &q.leaderResign,
		"schema_version":             &q.schemaVersion,
		"optimistic_window":          &q.optimisticWindow,
		"optimistic_claim":           &q.optimisticClaim,
		"queue_pause":                &q.queuePause,
		"queue_resume":               &q.queueResume,
		"queue_paused_all":           &q.queuePausedAll,
		"periodic_record":            &q.periodicRecord,
		"periodic_list":              &q.periodicList,
		"flow_lock":                  &q.flow.lock,
		"flow_lock_shared":           &q.flow.lockShared,
		"flow_lock_stripe":           &q.flow.lockStripe,
		"flow_state":                 &q.flow.state,
		"flow_running":               &q.flow.running,
		"flow_live":                  &q.flow.live,
		"flow_keys":                  &q.flow.keys,
		"flow_rates":                 &q.flow.rates,
		"flow_save_rates":            &q.flow.saveRates,
		"flow_take_key":              &q.flow.takeKey,
		"flow_take_block":            &q.flow.takeBlock,
		"flow_take_step":             &q.flow.takeStep,
		"flow_take_keyless":          &q.flow.takeKeyless,
		"flow_use":                   &q.flow.use,
		"flow_use_rates":             &q.flow.useRates,
		"flow_prune_rates":           &q.flow.pruneRates,
		"flow_quick":                 &q.flow.quick,
		"insert_wake_after":          wake[WakeAfterCommit],
		"insert_wake_now":            &q.insertWakeNow,
		"insert_wake_off":            wake[WakeOff],
		"insert_unique_wake_after":   wake["unique_"+WakeAfterCommit],
		"insert_unique_wake_off":     wake["unique_"+WakeOff],
	})
	q.insertWake, q.insertUniqueWake = map[string]string{}, map[string]string{}
	for _, mode := range []string{WakeAfterCommit, WakeOff} {
		q.insertWake[mode], q.insertUniqueWake[mode] = *wake[mode], *wake["unique_"+mode]
	}
	if err == nil {
		err = sqltext.Load(fsys, "sql/workflow", r, map[string]*string{
			"finish_deps":          &q.wf.finishDeps,
			"finish_deps_leased":   &q.wf.finishDepsLeased,
			"complete_deps_leased": &q.wf.completeDepsLeased,
			"workflow_unlease":     &q.wf.workflowUnlease,
			"settle_parents":       &q.wf.settleParents,
			"settle_children":      &q.wf.settleChildren,
			"batch_count":          &q.wf.batchCount,
			"batch_finish":         &q.wf.batchFinish,
			"release":              &q.wf.release,
			"drop_callback":        &q.wf.dropCallback,
			"batch_callbacks":      &q.wf.batchCallbacks,
			"workflow_insert":      &q.wf.workflowInsert,
			"next_ids":             &q.wf.nextIDs,
			"insert_tasks":         &q.wf.insertTasks,
			"insert_tasks_keyless": &q.wf.insertTasksKeyless,
			"deps_insert":          &q.wf.depsInsert,
			"workflow_summary":     &q.wf.workflowSummary,
			"workflow_get":         &q.wf.workflowGet,
			"workflow_jobs":        &q.wf.workflowJobs,
			"workflow_edges":       &q.wf.workflowEdges,
			"workflow_cancel":      &q.wf.workflowCancel,
			"workflow_lock":        &q.wf.workflowLock,
			"workflow_states":      &q.wf.workflowStates,
			"workflow_retry":       &q.wf.workflowRetry,
			"dependencies":         &q.wf.dependencies,
			"batch_insert":         &q.wf.batchInsert,
			"batch_total":          &q.wf.batchTotal,
			"batch_lock":           &q.wf.batchLock,
			"batch_seal":           &q.wf.batchSeal,
			"batch_get":            &q.wf.batchGet,
			"batch_list":           &q.wf.batchList,
			"batch_member_list":    &q.wf.batchMemberList,
			"unsettled":            &q.wf.unsettled,
			"prune":                &q.wf.prune,
		})
	}
	if err == nil {
		err = sqltext.Load(fsys, "sql/steps", r, map[string]*string{
			"step_record":      &q.steps.stepRecord,
			"step_record_many": &q.steps.stepRecordMany,
			"held":             &q.steps.held,
			"signal_lock":      &q.steps.signalLock,
			"signal_sent":      &q.steps.signalSent,
			"job_wait":         &q.steps.jobWait,
			"signal":           &q.steps.signal,
			"steps_of":         &q.steps.stepsOf,
			"signals_of":       &q.steps.signalsOf,
			"wait_of":          &q.steps.waitOf,
			"records_gone":     &q.steps.recordsGone,
			"orphans":          &q.steps.orphans,
		})
	}
	if err == nil {
		err = sqltext.Load(fsys, "sql/await", r, map[string]*string{
			"debounce_lock":    &q.await.debounceLock,
			"debounce_move":    &q.await.debounceMove,
			"debounce_set":     &q.await.debounceSet,
			"debounce_cleanup": &q.await.debounceCleanup,
			"finished_since":   &q.await.finishedSince,
		})
	}
	if err == nil {
		err = filledIn(q)
	}
	return q, err
}

// fragments returns the replacer that fills a statement of fsys in for schema:
// {{s}} the schema, {{NAME}} sql/fragments/NAME.sql without its opening
// comment lines, itself filled in first (a replacer does not look again
// at the text it put in).
func fragments(fsys fs.FS, schema string) (*strings.Replacer, error) {
	entries, err := fs.ReadDir(fsys, "sql/fragments")
	if err != nil {
		return nil, fmt.Errorf("load SQL: %w", err)
	}
	raw := map[string]string{}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".sql")
		if !ok {
			continue
		}
		b, err := fs.ReadFile(fsys, path.Join("sql/fragments", e.Name()))
		if err != nil {
			return nil, fmt.Errorf("load SQL: %w", err)
		}
		raw[name] = sqltext.Statement(string(b))
	}
	done := map[string]string{}
	var fill func(name string, seen []string) (string, error)
	fill = func(name string, seen []string) (string, error) {
		if text, ok := done[name]; ok {
			return text, nil
		}
		if slices.Contains(seen, name) {
			return "", fmt.Errorf("load SQL: fragment %s includes itself (%s)", name, strings.Join(seen, " > "))
		}
		text := raw[name]
		pairs := []string{"{{s}}", schema}
		for other := range raw {
			if strings.Contains(text, "{{"+other+"}}") {
				filled, err := fill(other, append(seen, name))
				if err != nil {
					return "", err
				}
				pairs = append(pairs, "{{"+other+"}}", filled)
			}
		}
		done[name] = strings.NewReplacer(pairs...).Replace(text)
		return done[name], nil
	}
	pairs := []string{"{{s}}", schema}
	for name := range raw {
		text, err := fill(name, nil)
		if err != nil {
			return nil, err
		}
		pairs = append(pairs, "{{"+name+"}}", text)
	}
	return strings.NewReplacer(pairs...), nil
}

// filledIn checks that no statement names a fragment sql/fragments lacks.
func filledIn(q queries) error {
	var check func(v reflect.Value) error
	check = func(v reflect.Value) error {
		for i := range v.NumField() {
			f := v.Field(i)
			var texts []string
			switch f.Kind() {
			case reflect.String:
				texts = []string{f.String()}
			case reflect.Map:
				for _, k := range f.MapKeys() {
					texts = append(texts, f.MapIndex(k).String())
				}
			case reflect.Struct:
				if err := check(f); err != nil {
					return err
				}
			}
			for _, text := range texts {
				if _, rest, ok := strings.Cut(text, "{{"); ok {
					name, _, _ := strings.Cut(rest, "}}")
					return fmt.Errorf("load SQL: statement %s names {{%s}}, which is no fragment of sql/fragments", v.Type().Field(i).Name, name)
				}
			}
		}
		return nil
	}
	return check(reflect.ValueOf(q))
}

// leased reports whether query is one of the leased statements, which find
// lease rows by the span index and run small batches on a generic plan
// (queryBatch).
func (q *queries) leased(query string) bool {
	switch query {
	case q.finishLeased, q.heartbeatLeased, q.completeLeasedKeep, q.completeLeasedKeepSteps, q.completeLeasedDelete:
		return true
	}
	return false
}
