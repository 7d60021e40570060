package scenarios

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spoolq/spool/backend/mysql"
	"github.com/spoolq/spool/cmd/spool/bench"
	"github.com/spoolq/spool/cmd/spool/cli"
	"github.com/spoolq/spool/internal/testkit/dbserver"
)

func init() {
	registerBenchScenario("rowcost", "MariaDB: a private server's CPU per job for each index of spool_jobs and each part of Spool's claim and completion, one dropped at a time",
		func(m *cli.Env) cli.Command { return &BenchRowcostCommand{m: m} })
}

// BenchRowcostCommand prices each secondary index of spool_jobs and each
// column Spool's claim and completion write: on a private mariadbd, a
// fresh copy of spool_jobs per configuration (one index dropped, or one
// part of the statements left out) is filled with pending rows and
// claimed and completed in batches by one session, and the server's CPU
// (its /proc ticks) is summed over the insert, the claims and the
// completions.
type BenchRowcostCommand struct{ m *cli.Env }

// rowcostConfig is one table and statement set.
type rowcostConfig struct {
	Name string `json:"name"`
	// drop is ALTER TABLE clauses applied to the copy.
	drop string
	// omit names parts of Spool's statements left out (mysqlStatementParts,
	// and "lease_guard": the completion's leases as leaseGuard writes them).
	omit []string
	// min is the minimal table and statements of lab ceiling's min-keep.
	min bool
	// side creates the side table schema 20 would add beside spool_jobs
	// (rowcostSideTable, with or without a foreign key onto the copy):
	// it stays empty, as it would for plain jobs, so what is counted is
	// what its presence costs them (with the foreign key, the lookup each
	// delete of the copy makes in it).
	side string
	// triggers are statements run after side: the triggers that would keep
	// a keyed job's side row in step with its job, firing for every row and
	// writing only when the row has a key.
	triggers []string
}

// rowcostSchema20 drops what schema 20 would move to a side table: the
// four indexes that only keyed jobs use (docs/mysql.md, "What a claim and
// a finish cost").
const rowcostSchema20 = "DROP KEY spool_jobs_flow, DROP KEY spool_jobs_flow_order, DROP KEY spool_jobs_unique, DROP KEY IF EXISTS spool_jobs_member"

// rowcostSideTable is the side table (a row only for a job with a flow
// key, a unique key, or a workflow or batch), beside the copy; %s is an
// optional constraint clause.
const rowcostSideTable = `CREATE TABLE rowcost.k (
  id BIGINT NOT NULL,
  queue VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  priority SMALLINT NOT NULL,
  run_at DATETIME(6) NOT NULL,
  flow_wait VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  unique_active VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NULL,
  has_dependents TINYINT NOT NULL DEFAULT 0,
  workflow_id BIGINT NULL,
  batch_id BIGINT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY k_unique (unique_active),
  KEY k_flow (queue, flow_wait, priority, run_at, id),
  KEY k_flow_order (queue, flow_wait),
  KEY k_member (has_dependents, workflow_id, batch_id, id)%s
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin`

// rowcostConfigs are the configurations, in the order each round runs them.
var rowcostConfigs = []rowcostConfig{
	{Name: "spool_jobs"},
	{Name: "-unique", drop: "DROP KEY spool_jobs_unique"},
	{Name: "-finalized", drop: "DROP KEY spool_jobs_finalized"},
	{Name: "-flow", drop: "DROP KEY spool_jobs_flow"},
	{Name: "-flow_order", drop: "DROP KEY spool_jobs_flow_order"},
	{Name: "-member", drop: "DROP KEY IF EXISTS spool_jobs_member"},
	{Name: "-flow-flow_order-unique-member", drop: "DROP KEY spool_jobs_flow, DROP KEY spool_jobs_flow_order, DROP KEY spool_jobs_unique, DROP KEY IF EXISTS spool_jobs_member"},
	{Name: "claim index only", drop: "DROP KEY spool_jobs_flow, DROP KEY spool_jobs_flow_order, DROP KEY spool_jobs_unique, DROP KEY IF EXISTS spool_jobs_member, DROP KEY spool_jobs_finalized"},
	{Name: "omit attempt", omit: []string{"attempt"}},
	{Name: "omit fence", omit: []string{"fence"}},
	{Name: "omit leased_by", omit: []string{"leased_by"}},
	{Name: "omit attempted_at", omit: []string{"attempted_at"}},
	{Name: "omit finalized_at", omit: []string{"finalized_at"}},
	{Name: "omit lease_list", omit: []string{"lease_list"}},
	{Name: "lease guard", omit: []string{"lease_list", "lease_guard"}},
	{Name: "omit all parts", omit: mysqlStatementParts},
	{Name: "minimal table", min: true},
	{Name: "side table FK", drop: rowcostSchema20, omit: []string{"lease_list", "lease_guard"},
		side: fmt.Sprintf(rowcostSideTable, ",\n  CONSTRAINT k_job FOREIGN KEY (id) REFERENCES rowcost.t (id) ON DELETE CASCADE")},
	{Name: "side table", drop: rowcostSchema20, omit: []string{"lease_list", "lease_guard"},
		side: fmt.Sprintf(rowcostSideTable, "")},
	{Name: "side table FK triggers", drop: rowcostSchema20, omit: []string{"lease_list", "lease_guard"},
		side:     fmt.Sprintf(rowcostSideTable, ",\n  CONSTRAINT k_job FOREIGN KEY (id) REFERENCES rowcost.t (id) ON DELETE CASCADE"),
		triggers: rowcostTriggers},
	{Name: "side table FK update trigger", drop: rowcostSchema20, omit: []string{"lease_list", "lease_guard"},
		side:     fmt.Sprintf(rowcostSideTable, ",\n  CONSTRAINT k_job FOREIGN KEY (id) REFERENCES rowcost.t (id) ON DELETE CASCADE"),
		triggers: rowcostTriggers[1:]},
	{Name: "schema 19", drop: "ADD KEY IF NOT EXISTS spool_jobs_member (has_dependents, workflow_id, batch_id, id)",
		omit: []string{"lease_list", "lease_guard"}},
	{Name: "schema 20", drop: "DROP KEY IF EXISTS spool_jobs_member", omit: []string{"lease_list", "lease_guard"},
		side: rowcostJobKeys},
	{Name: "side table -flow_wait-unique_active", drop: rowcostSchema20 + ", " + rowcostGenerated,
		omit: []string{"lease_list", "lease_guard"}, side: fmt.Sprintf(rowcostSideTable, "")},
	{Name: "-json checks", drop: rowcostNoJSONChecks},
	{Name: "side table -json", drop: rowcostSchema20 + ", " + rowcostGenerated + ", " + rowcostJSON,
		omit: []string{"lease_list", "lease_guard"}},
	{Name: "narrow", drop: rowcostSchema20 + ", " + rowcostNarrow, omit: []string{"lease_list", "lease_guard"}},
	{Name: "narrow claim index only", drop: rowcostSchema20 + ", DROP KEY spool_jobs_finalized, " + rowcostNarrow,
		omit: []string{"lease_list", "lease_guard"}},
}

// rowcostJobKeys is schema 20's spool_job_keys beside the copy, empty as
// for plain jobs: its foreign key makes every delete of the copy look in it.
const rowcostJobKeys = `CREATE TABLE rowcost.k (
  job_id BIGINT NOT NULL, has_dependents TINYINT NOT NULL DEFAULT 0, workflow_id BIGINT NULL, batch_id BIGINT NULL,
  PRIMARY KEY (job_id), KEY k_workflow (workflow_id), KEY k_batch (batch_id), KEY k_unsettled (has_dependents),
  CONSTRAINT k_job FOREIGN KEY (job_id) REFERENCES rowcost.t (id) ON DELETE CASCADE
) ENGINE = InnoDB`

// rowcostTriggers keep a keyed row's side row in step: after an insert and
// after an update, and only for a row with a flow key, a unique key or a
// workflow or batch (none of the lab's rows has one).
var rowcostTriggers = []string{
	`CREATE TRIGGER rowcost.t_keys_insert AFTER INSERT ON rowcost.t FOR EACH ROW
IF NEW.flow_key IS NOT NULL OR NEW.unique_key IS NOT NULL OR NEW.workflow_id IS NOT NULL OR NEW.batch_id IS NOT NULL OR NEW.has_dependents THEN
  INSERT INTO rowcost.k (id, queue, priority, run_at, flow_wait, has_dependents, workflow_id, batch_id)
  VALUES (NEW.id, NEW.queue, NEW.priority, NEW.run_at, IF(NEW.state IN ('available', 'scheduled', 'retryable'), NEW.flow_key, NULL), NEW.has_dependents, NEW.workflow_id, NEW.batch_id);
END IF`,
	`CREATE TRIGGER rowcost.t_keys_update AFTER UPDATE ON rowcost.t FOR EACH ROW
IF NEW.flow_key IS NOT NULL OR NEW.unique_key IS NOT NULL OR NEW.workflow_id IS NOT NULL OR NEW.batch_id IS NOT NULL OR NEW.has_dependents THEN
  UPDATE rowcost.k SET priority = NEW.priority, run_at = NEW.run_at,
    flow_wait = IF(NEW.state IN ('available', 'scheduled', 'retryable'), NEW.flow_key, NULL), has_dependents = NEW.has_dependents
  WHERE id = NEW.id;
END IF`,
}

// rowcostGenerated drops the two stored generated columns that fed
// schema 20's dropped indexes.
const rowcostGenerated = "DROP COLUMN flow_wait, DROP COLUMN unique_active"

// rowcostJSON drops the JSON columns a plain job's claim and completion
// never touch.
const rowcostJSON = "DROP COLUMN errors, DROP COLUMN tags, DROP COLUMN metadata, DROP COLUMN output"

// rowcostNoJSONChecks declares the JSON columns as LONGTEXT without the
// JSON_VALID check MariaDB attaches to its JSON alias, which a statement
// may evaluate for every column of every row it writes.
const rowcostNoJSONChecks = "MODIFY args LONGTEXT NOT NULL, MODIFY errors LONGTEXT NULL, MODIFY tags LONGTEXT NOT NULL, " +
	"MODIFY metadata LONGTEXT NOT NULL, MODIFY output LONGTEXT NULL"

// rowcostNarrow drops every column a plain job's claim and completion
// neither read nor write (after rowcostSchema20 has dropped the indexes on
// some of them): what the row's width costs, against a table that would
// keep those columns in a table of their own, written at insert and read
// by id.
const rowcostNarrow = rowcostGenerated + ", " + rowcostJSON + ", DROP COLUMN unique_key, DROP COLUMN unique_states, " +
	"DROP COLUMN flow_key, DROP COLUMN kind, " +
	"DROP COLUMN wait_kind, DROP COLUMN workflow_task, DROP COLUMN wait_signal, DROP COLUMN created_at, DROP COLUMN max_attempts, " +
	"DROP COLUMN deps_left, DROP COLUMN workflow_id, DROP COLUMN batch_id"

// rowcostRow is one configuration's result, µs of server CPU per job:
// medians over rounds, then every round.
type rowcostRow struct {
	Name   string       `json:"name"`
	Mode   string       `json:"mode"` // delete or keep
	Insert float64      `json:"insert_us"`
	Claim  float64      `json:"claim_us"`
	Finish float64      `json:"finish_us"`
	Runs   [][3]float64 `json:"runs_us"` // insert, claim, finish
}

// Run implements cli.Command.
func (c *BenchRowcostCommand) Run(ctx context.Context, args []string) error {
	const name = "rowcost"
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	jobs := fs.Int("jobs", 40000, "pending rows per configuration")
	batch := fs.Int("batch", 2000, "jobs per claim and completion")
	rounds := fs.Int("rounds", 3, "rounds; configurations alternate within each")
	only := fs.String("configs", "", "comma-separated configurations (default: all)")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := cli.ParseFlags(fs, args, c.Usage())
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cli.Usagef(name, "unexpected argument %q", pos[0])
	}
	if *jobs < *batch || *batch < 1 || *rounds < 1 {
		return cli.Usagef(name, "--batch must be at least 1, --jobs at least --batch, --rounds at least 1")
	}
	configs := rowcostConfigs
	if *only != "" {
		configs = nil
		for _, n := range strings.Split(*only, ",") {
			i := slices.IndexFunc(rowcostConfigs, func(c rowcostConfig) bool { return c.Name == strings.TrimSpace(n) })
			if i < 0 {
				return cli.Usagef(name, "unknown configuration %q", n)
			}
			configs = append(configs, rowcostConfigs[i])
		}
	}
	dir, err := os.MkdirTemp("", "spool-lab-rowcost-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := dbserver.StartMariaDBWith(ctx, dir, dbserver.Options{Durable: true})
	if err != nil {
		return fmt.Errorf("lab rowcost: %w", err)
	}
	defer func() {
		if serr := srv.Stop(); serr != nil {
			err = errors.Join(err, serr)
		}
	}()
	rc := &rowcost{pid: srv.PID(), jobs: *jobs, batch: *batch}
	if err := rc.open(ctx, srv.URL()); err != nil {
		return fmt.Errorf("lab rowcost: %w", err)
	}
	defer rc.be.Close()
	var rows []rowcostRow
	for round := 0; round < *rounds; round++ {
		k := 0
		for _, cfg := range configs {
			for _, del := range []bool{true, false} {
				r, err := rc.run(ctx, cfg, del)
				if err != nil {
					return fmt.Errorf("lab rowcost: %s: %w", cfg.Name, err)
				}
				if round == 0 {
					mode := "keep"
					if del {
						mode = "delete"
					}
					rows = append(rows, rowcostRow{Name: cfg.Name, Mode: mode})
				}
				rows[k].Runs = append(rows[k].Runs, r)
				k++
			}
		}
	}
	for i := range rows {
		var in, cl, fi []float64
		for _, r := range rows[i].Runs {
			in, cl, fi = append(in, r[0]), append(cl, r[1]), append(fi, r[2])
		}
		rows[i].Insert, rows[i].Claim, rows[i].Finish = bench.Median(in), bench.Median(cl), bench.Median(fi)
	}
	if *asJSON {
		e := json.NewEncoder(c.m.Stdout)
		e.SetIndent("", "  ")
		return e.Encode(rows)
	}
	tw := tabwriter.NewWriter(c.m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "configuration\tmode\tinsert µs\tclaim µs\tfinish µs\tclaim+finish\t\n")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.1f\t%.1f\t%.1f\t\n", r.Name, r.Mode, r.Insert, r.Claim, r.Finish, r.Claim+r.Finish)
	}
	return tw.Flush()
}

// rowcost holds the private server's connection and the source rows.
type rowcost struct {
	pid         int
	jobs, batch int
	be          *mysql.Backend
	db          *sql.DB
}

// open creates the databases (rowcost_src with Spool's schema and the
// pending rows, rowcost for the copies) and connects.
func (rc *rowcost) open(ctx context.Context, baseURL string) error {
	base, err := mysql.Open(ctx, baseURL)
	if err != nil {
		return err
	}
	_, err = base.DB().ExecContext(ctx, "CREATE DATABASE rowcost_src")
	if err == nil {
		_, err = base.DB().ExecContext(ctx, "CREATE DATABASE rowcost")
	}
	_ = base.Close()
	if err != nil {
		return err
	}
	u := strings.TrimSuffix(baseURL, "/mysql") + "/rowcost_src"
	if rc.be, err = mysql.Open(ctx, u); err != nil {
		return err
	}
	if err := rc.be.Migrate(ctx); err != nil {
		return err
	}
	rc.db = rc.be.DB()
	rc.db.SetMaxOpenConns(1)
	if _, err := rc.db.ExecContext(ctx, "SET SESSION max_recursive_iterations = "+strconv.Itoa(rc.jobs+1)); err != nil {
		return err
	}
	_, err = rc.db.ExecContext(ctx, `INSERT INTO rowcost_src.spool_jobs (queue, kind, args, priority, run_at, state, max_attempts, tags, metadata, created_at)
WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ?)
SELECT 'default', 'rowcost', '{"n":1}', 1, UTC_TIMESTAMP(6) - INTERVAL 1 SECOND, 'available', 25, '[]', '{}', UTC_TIMESTAMP(6) FROM s`, rc.jobs)
	return err
}

// cpu is the server's CPU so far (mariadbd runs as one process, so its
// tree is itself).
func (rc *rowcost) cpu() (time.Duration, error) {
	d, ok := bench.TreeCPU(rc.pid)
	if !ok {
		return 0, fmt.Errorf("read the CPU of mariadbd (pid %d) from /proc", rc.pid)
	}
	return d, nil
}

// purged waits until InnoDB's history list is (nearly) empty, so that the
// purge of one step is counted with it.
func (rc *rowcost) purged(ctx context.Context) error {
	for range 1200 {
		var n int64
		if err := rc.db.QueryRowContext(ctx, `SELECT count FROM information_schema.INNODB_METRICS WHERE name = 'trx_rseg_history_len'`).Scan(&n); err != nil {
			return err
		}
		if n < 50 {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("the purge did not catch up in a minute")
}

// run measures one configuration: µs of server CPU per job for the
// insert, the claims and the completions.
func (rc *rowcost) run(ctx context.Context, cfg rowcostConfig, del bool) (out [3]float64, err error) {
	exec := func(q string) error {
		_, err := rc.db.ExecContext(ctx, q)
		return err
	}
	omitted := func(p string) bool { return slices.Contains(cfg.omit, p) }
	if err := exec("DROP TABLE IF EXISTS rowcost.k"); err != nil {
		return out, err
	}
	if err := exec("DROP TABLE IF EXISTS rowcost.t"); err != nil {
		return out, err
	}
	var claim, set, done, fill string
	if cfg.min {
		err = exec(`CREATE TABLE rowcost.t (
  id BIGINT NOT NULL AUTO_INCREMENT, queue VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  priority SMALLINT NOT NULL, run_at DATETIME(6) NOT NULL,
  state ENUM('available', 'scheduled', 'retryable', 'running', 'completed', 'discarded', 'cancelled') NOT NULL,
  args JSON NOT NULL, PRIMARY KEY (id), KEY t_claim (queue, state, priority, run_at, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin`)
		fill = "INSERT INTO rowcost.t (id, queue, priority, run_at, state, args) SELECT id, queue, priority, run_at, state, args FROM rowcost_src.spool_jobs"
		claim = "SELECT id, 0 FROM rowcost.t WHERE queue = 'default' AND state = 'available' AND run_at <= UTC_TIMESTAMP(6) ORDER BY priority, run_at, id"
	} else {
		err = exec("CREATE TABLE rowcost.t LIKE rowcost_src.spool_jobs")
		if err == nil && cfg.drop != "" {
			err = exec("ALTER TABLE rowcost.t " + cfg.drop)
		}
		if err == nil && cfg.side != "" {
			err = exec(cfg.side)
		}
		for _, q := range cfg.triggers {
			if err == nil {
				err = exec(q)
			}
		}
		// The copy's stored columns, which a configuration may have dropped
		// some of: the source has them all.
		var cols string
		if err == nil {
			err = rc.db.QueryRowContext(ctx, `SELECT group_concat(column_name ORDER BY ordinal_position) FROM information_schema.columns
WHERE table_schema = 'rowcost' AND table_name = 't' AND extra NOT LIKE '%GENERATED%'`).Scan(&cols)
		}
		fill = "INSERT INTO rowcost.t (" + cols + ") SELECT " + cols + " FROM rowcost_src.spool_jobs"
		claim = "SELECT id, fence FROM rowcost.t FORCE INDEX (spool_jobs_claim) WHERE phase = 1 AND queue = 'default' AND run_at <= UTC_TIMESTAMP(6) ORDER BY priority, run_at, id"
		set = ", leased_until = UTC_TIMESTAMP(6) + INTERVAL 1 MINUTE"
		for _, p := range []struct{ name, sql string }{
			{"attempt", ", attempt = attempt + 1"},
			{"fence", ", fence = fence + 1"},
			{"leased_by", ", leased_by = '" + fmt.Sprintf("%-64s", "spool-lab-rowcost") + "'"},
			{"attempted_at", ", attempted_at = UTC_TIMESTAMP(6)"},
		} {
			if !omitted(p.name) {
				set += p.sql
			}
		}
		if !omitted("finalized_at") {
			done = ", finalized_at = UTC_TIMESTAMP(6)"
		}
	}
	if err != nil {
		return out, err
	}
	claim += " LIMIT " + strconv.Itoa(rc.batch) + " FOR UPDATE SKIP LOCKED"
	if err := rc.purged(ctx); err != nil {
		return out, err
	}
	t0, err := rc.cpu()
	if err == nil {
		err = exec(fill)
	}
	if err == nil {
		err = rc.purged(ctx)
	}
	t1, terr := rc.cpu()
	if err = errors.Join(err, terr); err != nil {
		return out, err
	}
	var claimCPU, finishCPU time.Duration
	for {
		a, err := rc.cpu()
		if err != nil {
			return out, err
		}
		ids, fences, err := rc.claim(ctx, claim, "UPDATE rowcost.t SET state = 'running'"+set+" WHERE id IN ")
		if err != nil || len(ids) == 0 {
			if err == nil {
				break
			}
			return out, err
		}
		b, err := rc.cpu()
		if err != nil {
			return out, err
		}
		claimCPU += b - a
		q := "UPDATE rowcost.t SET state = 'completed'" + done + " WHERE state = 'running' AND id IN " + idList(ids)
		if del {
			q = "DELETE FROM rowcost.t WHERE state = 'running' AND id IN " + idList(ids)
		}
		if !cfg.min && !omitted("fence") {
			for i := range fences {
				fences[i]++
			}
		}
		switch {
		case omitted("lease_guard"):
			q += " AND NOT has_dependents" + rowcostLeaseGuard(ids, fences)
		case !cfg.min && !omitted("lease_list"):
			q += " AND NOT has_dependents AND (id, fence) IN " + leaseRowList(ids, fences, 0)
		}
		res, err := rc.db.ExecContext(ctx, q)
		if err != nil {
			return out, fmt.Errorf("finish: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || int(n) != len(ids) {
			return out, fmt.Errorf("finish: %d of %d rows (%v)", n, len(ids), err)
		}
		c, err := rc.cpu()
		if err != nil {
			return out, err
		}
		finishCPU += c - b
	}
	// The completions' purge runs beside them; what is left is theirs.
	b, err := rc.cpu()
	if err == nil {
		err = rc.purged(ctx)
	}
	c, terr := rc.cpu()
	if err = errors.Join(err, terr); err != nil {
		return out, err
	}
	finishCPU += c - b
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(rc.jobs) }
	return [3]float64{us(t1 - t0), us(claimCPU), us(finishCPU)}, nil
}

// claim runs one claim transaction: the locking read, the claim's UPDATE
// by ids (update, to which the id list is appended), COMMIT.
func (rc *rowcost) claim(ctx context.Context, claim, update string) (ids, fences []int64, err error) {
	tx, err := rc.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	rows, err := tx.QueryContext(ctx, claim)
	if err != nil {
		return nil, nil, err
	}
	for rows.Next() {
		var id, f int64
		if err := rows.Scan(&id, &f); err != nil {
			rows.Close()
			return nil, nil, err
		}
		ids, fences = append(ids, id), append(fences, f)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	if len(ids) > 0 {
		if _, err := tx.ExecContext(ctx, update+idList(ids)); err != nil {
			return nil, nil, err
		}
	}
	return ids, fences, tx.Commit()
}

// Usage implements cli.Command.
func (c *BenchRowcostCommand) Usage() string {
	return `Usage: lab rowcost [flags]

Prices each secondary index of MariaDB's spool_jobs and each part of
Spool's claim and completion. A private mariadbd (flushing its log at
every commit) gets Spool's schema and --jobs pending rows; for each
configuration a fresh copy of spool_jobs (CREATE TABLE … LIKE, then the
configuration's ALTER) is filled from them (INSERT … SELECT), then one
session claims and completes them --batch at a time as Spool does (the
locking read through the claim index, the claim's UPDATE by ids, COMMIT;
then an autocommitted UPDATE to completed, or a DELETE, by ids with the
lease list), once deleting and once keeping. The server's CPU (its /proc
ticks) over the insert (and its purge), over the claims and over the
completions (with their purge) is printed in µs a job, medians over the
rounds; configurations alternate within each round.

Configurations: spool_jobs as migrated; each of its secondary indexes
beyond the claim index dropped (-unique, -finalized, -flow, -flow_order,
-member), the four that only some jobs use dropped together, all five;
each part of Spool's statements left out (omit attempt, fence,
leased_by, attempted_at, finalized_at, lease_list); the completion's
leases as the lease guard ("fence = f") instead of the row list "(id,
fence) IN (…)"; none of those parts; the minimal table of lab ceiling's
min-keep. Schema 20's table for a plain job, with the lease guard: the
four indexes only keyed jobs use dropped, and the side table that would
hold those jobs' keys created empty beside the copy, with a foreign key
that deletes its rows with their job ("side table FK": every delete of
the copy looks in it) or without ("side table": keyed jobs' deletes
would name it); "side table -flow_wait-unique_active" also drops the
two stored generated columns that fed the dropped indexes. What the
row's width costs: "-json checks" declares the JSON columns without
MariaDB's JSON_VALID check; "narrow" is schema 20's table for a plain
job without every column its claim and completion neither read nor
write (they would live in a table of their own, read by id), and
"narrow claim index only" also without spool_jobs_finalized. (Those
configurations name the whole plan "schema 20"; the schema 20 built moved
only spool_jobs_member.) The schema 20 built against 19, with the lease
guard: "schema 19" adds spool_jobs_member back to the copy, "schema 20"
has it dropped and an empty spool_job_keys, with its foreign key, beside
it. Keeping a side table in step by triggers: "side table FK triggers"
adds to "side table FK" an AFTER INSERT and an AFTER UPDATE trigger that
write only for a row with a key; "side table FK update trigger" the
latter alone.

Flags:

	--jobs N
		pending rows per configuration (default 40000)
	--batch N
		jobs per claim and completion (default 2000)
	--rounds N
		rounds (default 3)
	--configs LIST
		configurations to run, by name (default all)
	--json
		print JSON
`
}

// rowcostLeaseGuard is backend/mysql's leaseGuard: " AND fence = f" when
// every lease has fence f, else one "fence = f AND id IN (…)" arm per
// fence.
func rowcostLeaseGuard(ids, fences []int64) string {
	var first []int64
	for _, f := range fences {
		if !slices.Contains(first, f) {
			first = append(first, f)
		}
	}
	if len(first) == 1 {
		return " AND fence = " + strconv.FormatInt(first[0], 10)
	}
	arms := make([]string, len(first))
	for k, f := range first {
		var group []int64
		for i, g := range fences {
			if g == f {
				group = append(group, ids[i])
			}
		}
		arms[k] = "fence = " + strconv.FormatInt(f, 10) + " AND id IN " + idList(group)
	}
	return " AND (" + strings.Join(arms, " OR ") + ")"
}
