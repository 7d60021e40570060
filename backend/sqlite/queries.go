package sqlite

import (
	"embed"
	"fmt"
	"strings"

	"github.com/spoolq/spool/backend/sqltext"
)

// statements holds the backend's fixed statements, one file each in sql/,
// named after the field (releaseClaim in release_claim.sql). {{cols}} is
// jobColumns, {{claim_cols}} claimColumns, {{finish_input}} finishInput and
// {{NAME}} the fragment sql/fragments/NAME.sql (claim_pick);
// {{pairs}} is left for finish.go, which puts in as many "(?, ?)" as a
// batch needs. Nothing else is spliced in, every value is bound.
type statements struct {
	cancel                string
	claim                 string
	claimLease            string
	claimProbe            string
	cleanup               string
	createMigrationsTable string
	dataVersion           string
	finishDelete          string
	finishCompleteDelete  string
	finishCompleteKeep    string
	finishUpdate          string
	get                   string
	heartbeat             string
	insertHead            string
	jobExists             string
	deleteJob, throughput string
	uniqueHolder          string
	jobState              string
	leaderElect           string
	leaderResign          string
	list                  string
	migrationsTableExists string
	recordMigration       string
	releaseClaim          string
	rescue                string
	retry                 string
	schemaVersion         string
	stallCredit           string
	stallCreditLeases     string
	stallCredited         string
	stallTableExists      string
	stats                 string
	queuePause            string
	queueResume           string
	queuePausedAll        string
	cancelEvent           string
	cancelEventsPrune     string
	cancelEventsSince     string
	cancelEventsLast      string
	record                string
	flowPaused            string
	flowRunning           string
	flowKeys              string
	flowRate              string
	flowSaveRate          string
	flowTakeKeys          string
	flowPartKey           string
	flowPartBlock         string
	flowPartStep          string
	flowTakeKeyless       string
	flowUse               string
	flowUseRates          string
	flowPruneRates        string
	periodicRecord        string
	periodicList          string
}

// finishInput is the JSON array of [id, fence, outcome, delay_us, error]
// rows (?2) that the finish statements read with json_each.
const finishInput = `(SELECT e.value->>0 AS fid, e.value->>1 AS ffence, e.value->>2 AS outcome,
  e.value->>3 AS delay, e.value->>4 AS err FROM json_each(?2) AS e)`

//go:embed sql/*.sql sql/fragments/*.sql
var sqlFiles embed.FS

// stmt holds the statements, loaded when the package initialises. The files
// are embedded in the build, so a mismatch between them and the fields is a
// broken build, which every test of the package reports at once.
var stmt = mustLoadStatements()

func mustLoadStatements() statements {
	var (
		s         statements
		claimPick string
	)
	if err := sqltext.Load(sqlFiles, "sql/fragments", strings.NewReplacer(), map[string]*string{"claim_pick": &claimPick}); err != nil {
		panic(fmt.Sprintf("sqlite backend: %v", err))
	}
	r := strings.NewReplacer("{{cols}}", jobColumns, "{{claim_cols}}", claimColumns, "{{finish_input}}", finishInput,
		"{{claim_pick}}", claimPick)
	err := sqltext.Load(sqlFiles, "sql", r, map[string]*string{
		"cancel":                  &s.cancel,
		"claim":                   &s.claim,
		"claim_lease":             &s.claimLease,
		"claim_probe":             &s.claimProbe,
		"cleanup":                 &s.cleanup,
		"create_migrations_table": &s.createMigrationsTable,
		"data_version":            &s.dataVersion,
		"finish_delete":           &s.finishDelete,
		"finish_complete_delete":  &s.finishCompleteDelete,
		"finish_complete_keep":    &s.finishCompleteKeep,
		"finish_update":           &s.finishUpdate,
		"get":                     &s.get,
		"heartbeat":               &s.heartbeat,
		"insert_head":             &s.insertHead,
		"unique_holder":           &s.uniqueHolder,
		"job_exists":              &s.jobExists,
		"job_state":               &s.jobState,
		"cancel_event":            &s.cancelEvent,
		"record":                  &s.record,
		"cancel_events_prune":     &s.cancelEventsPrune,
		"cancel_events_since":     &s.cancelEventsSince,
		"cancel_events_last":      &s.cancelEventsLast,
		"leader_elect":            &s.leaderElect,
		"leader_resign":           &s.leaderResign,
		"list":                    &s.list,
		"delete":                  &s.deleteJob,
		"throughput":              &s.throughput,
		"migrations_table_exists": &s.migrationsTableExists,
		"record_migration":        &s.recordMigration,
		"release_claim":           &s.releaseClaim,
		"rescue":                  &s.rescue,
		"retry":                   &s.retry,
		"schema_version":          &s.schemaVersion,
		"stall_credit":            &s.stallCredit,
		"stall_credit_leases":     &s.stallCreditLeases,
		"stall_credited":          &s.stallCredited,
		"stall_table_exists":      &s.stallTableExists,
		"stats":                   &s.stats,
		"queue_pause":             &s.queuePause,
		"queue_resume":            &s.queueResume,
		"queue_paused_all":        &s.queuePausedAll,
		"flow_paused":             &s.flowPaused,
		"flow_running":            &s.flowRunning,
		"flow_keys":               &s.flowKeys,
		"flow_rate":               &s.flowRate,
		"flow_save_rate":          &s.flowSaveRate,
		"flow_take_keys":          &s.flowTakeKeys,
		"flow_part_key":           &s.flowPartKey,
		"flow_part_block":         &s.flowPartBlock,
		"flow_part_step":          &s.flowPartStep,
		"flow_take_keyless":       &s.flowTakeKeyless,
		"flow_use":                &s.flowUse,
		"flow_use_rates":          &s.flowUseRates,
		"flow_prune_rates":        &s.flowPruneRates,
		"periodic_record":         &s.periodicRecord,
		"periodic_list":           &s.periodicList,
	})
	if err != nil {
		panic(fmt.Sprintf("sqlite backend: %v", err))
	}
	return s
}
