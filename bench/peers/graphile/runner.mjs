// Graphile Worker runner for Spool's peer benchmark (bench/peers).
//
// The Go command starts it once per run: it reads a run spec as JSON on
// stdin, runs the scenario (drain, insert or steady) on the fresh database
// the spec names, and writes the result as JSON on stdout, with the same
// field names as the Go runners. Errors go to stderr with a non-zero exit.
import { fork } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Worker, isMainThread, parentPort, workerData } from "node:worker_threads";

// Graphile Worker logs every successful job unless this is set (it reads it
// when its modules load, so it is set before the import). Spool and River
// log nothing per job either.
process.env.NO_LOG_SUCCESS = "1";
const { run, runMigrations, makeWorkerUtils, Logger } = await import("graphile-worker");

const TASK = "peer_noop"; // the Go side's jobKind
const STALL_LIMIT_MS = 30_000;
const LOCAL_QUEUE_SIZE = 500; // the performance page's configuration
const PROGRESS_MS = 20; // how often a worker process reports its handler calls
const MAX_POOL = 60; // connections of all worker processes: keeps every run inside the server's max_connections

// Warnings and errors only, to stderr.
const logger = new Logger(() => (level, message) => {
  if (level === "error" || level === "warning") {
    console.error(`graphile-worker ${level}: ${message}`);
  }
});

const nowNS = () => process.hrtime.bigint();
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function version() {
  const pkg = new URL("./node_modules/graphile-worker/package.json", import.meta.url);
  return "graphile-worker " + JSON.parse(readFileSync(pkg, "utf8")).version + " (node " + process.version + ")";
}

// settings returns the worker preset of the spec's system and its account.
function settings(spec) {
  const batched = spec.system === "graphile-batched";
  const worker = {
    connectionString: spec.url,
    concurrentJobs: spec.workers,
    // The pool cap is shared by the processes, so that a run stays inside
    // the server's max_connections however many there are.
    // The performance page's configuration runs concurrentJobs 24 with a
    // pool of 25; the docs otherwise advise concurrentJobs + 2.
    maxPoolSize: Math.min(batched ? spec.workers + 1 : spec.workers + 2, Math.max(2, Math.floor(MAX_POOL / processes(spec)))),
    preparedStatements: true,
    logger,
  };
  if (batched) {
    worker.localQueue = { size: LOCAL_QUEUE_SIZE };
    worker.completeJobBatchDelay = 0;
    worker.failJobBatchDelay = 0;
  }
  const account = {
    processes: processes(spec) === 1 ? "1" : `${processes(spec)} (Graphile Worker's way to use several cores: a process each; each with the settings below)`,
    concurrentJobs: String(worker.concurrentJobs),
    maxPoolSize: String(worker.maxPoolSize),
    preparedStatements: "true",
    pollInterval: "2000ms (default; new jobs arrive by LISTEN/NOTIFY)",
    NO_LOG_SUCCESS: "1",
    localQueue: batched ? `{size: ${LOCAL_QUEUE_SIZE}}` : "off (default)",
    completeJobBatchDelay: batched ? "0" : "-1 (off, default)",
    failJobBatchDelay: batched ? "0" : "-1 (off, default)",
  };
  return { preset: { worker }, account };
}

// processes is how many worker processes a run uses: the spec's, or one.
const processes = (spec) => Math.max(1, spec.processes ?? 1);

// Handled records which jobs ran, and when each first started.
class Handled {
  constructor(n) {
    this.calls = new Int32Array(n);
    this.startNS = new BigInt64Array(n);
    this.total = 0;
    this.distinct = 0;
    this.all = new Promise((resolve) => (this.resolveAll = resolve));
    if (n === 0) this.resolveAll();
  }
  mark(seq) {
    this.total++;
    if (!(seq >= 0 && seq < this.calls.length) || this.calls[seq]++ !== 0) return;
    this.startNS[seq] = nowNS();
    if (++this.distinct === this.calls.length) this.resolveAll();
  }
  get duplicates() {
    return this.total - this.distinct;
  }
  // merge adds the calls and first starts another process recorded.
  merge(calls, startNS) {
    for (let seq = 0; seq < calls.length; seq++) {
      const n = calls[seq];
      if (n === 0) continue;
      this.total += n;
      if (this.calls[seq] === 0 || startNS[seq] < this.startNS[seq]) this.startNS[seq] = startNS[seq];
      if (this.calls[seq] === 0 && ++this.distinct === this.calls.length) this.resolveAll();
      this.calls[seq] += n;
    }
  }
}

// startWorkers starts the workers of a run on the jobs 0..total-1 and
// returns { stop }, whose promise resolves once every worker has stopped
// and h holds every process's calls. With one process the worker runs
// here; with more, each is a child process running this file with
// --worker, started and loaded before the clock starts (start is called
// just before they begin), and each reports its calls when stopped.
async function startWorkers(spec, preset, h, total, start) {
  const n = processes(spec);
  if (n === 1) {
    const taskList = { [TASK]: async (payload) => h.mark(payload.seq) };
    start();
    const runner = await run({ taskList, noHandleSignals: true, preset });
    return { total: () => h.total, stop: () => runner.stop() };
  }
  const children = [];
  for (let i = 0; i < n; i++) {
    const child = fork(fileURLToPath(import.meta.url), ["--worker"], { serialization: "advanced", stdio: ["ignore", "ignore", "inherit", "ipc"] });
    const exited = new Promise((resolve, reject) => {
      child.once("exit", (code) => (code === 0 ? resolve() : reject(new Error(`worker process exited with ${code}`))));
    });
    // A child reports its handler calls so far every PROGRESS_MS (c.total);
    // next is its next other message; a child that exits first fails it.
    const c = { child, exited, total: 0, waiter: null };
    child.on("message", (m) => {
      if (m?.progress !== undefined) c.total = m.progress;
      else if (c.waiter) [c.waiter, c.waiter = null][0](m);
    });
    c.next = () => new Promise((resolve, reject) => {
      c.waiter = resolve;
      exited.then(() => reject(new Error("worker process exited without reporting")), reject);
    });
    children.push(c);
  }
  await Promise.all(children.map(async (c) => {
    const loaded = c.next();
    c.child.send({ spec, total });
    await loaded;
  }));
  start();
  await Promise.all(children.map(async (c) => {
    const running = c.next();
    c.child.send("go");
    await running;
  }));
  return {
    total: () => children.reduce((n, c) => n + c.total, 0),
    stop: async () => {
      await Promise.all(children.map(async (c) => {
        const report = c.next();
        c.child.send("stop");
        const { calls, startNS } = await report;
        h.merge(calls, startNS);
        await c.exited;
      }));
    },
  };
}

// workerProcess is a child of startWorkers: it loads, runs the worker when
// told to go, and on stop reports the calls and first starts it saw.
async function workerProcess() {
  const { spec, total } = await new Promise((resolve) => process.once("message", resolve));
  const { preset } = settings(spec);
  const h = new Handled(total);
  const taskList = { [TASK]: async (payload) => h.mark(payload.seq) };
  const go = new Promise((resolve) => process.once("message", resolve));
  process.send("loaded");
  await go;
  const runner = await run({ taskList, noHandleSignals: true, preset });
  const stop = new Promise((resolve) => process.once("message", resolve));
  process.send("running");
  const progress = setInterval(() => process.send({ progress: h.total }), PROGRESS_MS);
  await stop;
  clearInterval(progress);
  await runner.stop();
  // Disconnect only once the report is sent: disconnecting at once can
  // drop it.
  await new Promise((resolve, reject) => process.send({ calls: h.calls, startNS: h.startNS }, (err) => (err ? reject(err) : resolve())));
  process.disconnect();
}

// waitProgress resolves when done resolves; it rejects when progress() has
// not changed for STALL_LIMIT_MS.
async function waitProgress(done, progress, describe) {
  let finished = false;
  done.then(() => (finished = true));
  let last = progress();
  let lastChange = Date.now();
  while (!finished) {
    await Promise.race([done, sleep(250)]);
    const p = progress();
    if (p !== last) {
      last = p;
      lastChange = Date.now();
    } else if (!finished && Date.now() - lastChange > STALL_LIMIT_MS) {
      throw new Error(`no progress for ${STALL_LIMIT_MS} ms: ${describe()}`);
    }
  }
}

function jobSpecs(from, to) {
  const specs = new Array(to - from);
  for (let i = 0; i < specs.length; i++) specs[i] = { identifier: TASK, payload: { seq: from + i } };
  return specs;
}

async function countJobs(utils) {
  return utils.withPgClient(async (client) => {
    const { rows } = await client.query("select count(*)::int as n from graphile_worker._private_jobs");
    return rows[0].n;
  });
}

// insertAll writes the jobs with addJobs (the add_jobs SQL function), chunk
// at a time, and returns the seconds spent in those calls.
async function insertAll(utils, spec) {
  const chunks = [];
  for (let from = 0; from < spec.jobs; from += spec.chunk) chunks.push(jobSpecs(from, Math.min(spec.jobs, from + spec.chunk)));
  const t0 = nowNS();
  for (const chunk of chunks) await utils.addJobs(chunk);
  return Number(nowNS() - t0) / 1e9;
}

// waitTableEmpty resolves when the jobs table is empty: every completion
// written. A job is complete when its row is deleted, after its handler
// returned; without batching, Graphile Worker sends that DELETE without
// waiting for it, and runner.stop() does not wait for it either, so a
// count taken right after the last handler (or after stop) can miss
// completions still in flight. It rejects when the count has not moved for
// STALL_LIMIT_MS.
async function waitTableEmpty(utils) {
  let remaining = -1;
  let last = Date.now();
  for (;;) {
    const n = await countJobs(utils);
    if (n === 0) return;
    if (n !== remaining) [remaining, last] = [n, Date.now()];
    if (Date.now() - last > STALL_LIMIT_MS) throw new Error(`${n} jobs left in the table after every job ran`);
    await sleep(1);
  }
}

// waitCalls resolves once the workers' handlers were called n times; it
// rejects when the count has not moved for STALL_LIMIT_MS.
async function waitCalls(workers, n) {
  let done;
  const all = new Promise((resolve) => (done = resolve));
  const tick = setInterval(() => workers.total() >= n && done(), 1);
  try {
    await waitProgress(all, workers.total, () => `${workers.total()} of ${n} handler calls`);
  } finally {
    clearInterval(tick);
  }
}

async function drain(spec, res, preset, utils) {
  const insertSeconds = await insertAll(utils, spec);
  res.insert_jobs_per_s = spec.jobs / insertSeconds;
  const h = new Handled(spec.jobs);
  let t0;
  const workers = await startWorkers(spec, preset, h, spec.jobs, () => (t0 = nowNS()));
  let t1;
  try {
    // Once the handlers have run every job (with several processes, as
    // many calls as jobs), the table empties when every completion is
    // written: it is counted only then, not to load the server meanwhile.
    await waitCalls(workers, spec.jobs);
    await waitTableEmpty(utils);
    t1 = nowNS();
  } finally {
    await workers.stop();
  }
  const seconds = Number(t1 - t0) / 1e9;
  Object.assign(res, { jobs: spec.jobs, seconds, jobs_per_s: spec.jobs / seconds, duplicates: h.duplicates, expected: spec.jobs });
  res.completed = spec.jobs - (await countJobs(utils));
  if (h.distinct !== spec.jobs) throw new Error(`${spec.jobs - h.distinct} jobs were deleted but no handler ran them`);
}

async function insert(spec, res, utils) {
  const seconds = await insertAll(utils, spec);
  Object.assign(res, { jobs: spec.jobs, seconds, jobs_per_s: spec.jobs / seconds, expected: spec.jobs });
  res.settings.method = "addJobs";
  res.settings.chunk = String(spec.chunk);
  res.stored = await countJobs(utils);
}

function summarize(latencies) {
  const s = Float64Array.from(latencies).sort();
  const at = (q) => s[Math.min(Math.max(Math.ceil(q * s.length) - 1, 0), s.length - 1)];
  return { p50: at(0.5), p95: at(0.95), p99: at(0.99), p99_9: at(0.999), max: s[s.length - 1], samples: s.length };
}

async function steady(spec, res, preset, utils) {
  const warm = Math.floor(spec.rate * (spec.warmup_ms / 1000));
  const total = warm + Math.floor(spec.rate * (spec.duration_ms / 1000));
  const h = new Handled(total);
  const workers = await startWorkers(spec, preset, h, total, () => {});
  let achieved;
  const commits = new BigInt64Array(new SharedArrayBuffer(8 * total));
  try {
    // The inserter runs on a thread of its own with a pool of its own, as
    // another process would: it must not share the worker's event loop.
    achieved = await new Promise((resolve, reject) => {
      const w = new Worker(new URL(import.meta.url), { workerData: { spec, total, commits } });
      w.once("message", resolve);
      w.once("error", reject);
      w.once("exit", (code) => code !== 0 && reject(new Error(`inserter exited with ${code}`)));
    });
    await waitCalls(workers, total);
    await waitTableEmpty(utils);
  } finally {
    await workers.stop();
  }
  const lat = [];
  for (let i = warm; i < total; i++) {
    if (h.startNS[i] === 0n) throw new Error(`job ${i}: inserted but never started`);
    lat.push(Number(h.startNS[i] - commits[i]) / 1e6);
  }
  Object.assign(res, { jobs: lat.length, latency_ms: summarize(lat), achieved_rate: achieved, duplicates: h.duplicates, expected: total });
  res.settings.inserter = `worker thread, own pool; addJob per job, <=${spec.inflight} in flight`;
  res.completed = total - (await countJobs(utils));
}

// inserterThread inserts jobs 0..total-1 at spec.rate, job i due at
// start + i/rate, at most spec.inflight at once, and records when each
// insert returned (its commit).
async function inserterThread({ spec, total, commits }) {
  const utils = await makeWorkerUtils({ connectionString: spec.url, maxPoolSize: spec.inflight, logger });
  try {
    const intervalNS = 1e9 / spec.rate;
    const start = nowNS();
    let inflight = 0;
    let slot = null;
    let failure = null;
    const pending = new Set();
    for (let i = 0; i < total && !failure; i++) {
      const due = start + BigInt(Math.round(i * intervalNS));
      const wait = Number(due - nowNS()) / 1e6;
      if (wait > 0) await sleep(wait);
      while (inflight >= spec.inflight) await new Promise((resolve) => (slot = resolve));
      inflight++;
      const p = utils
        .addJob(TASK, { seq: i })
        .then(
          () => (commits[i] = nowNS()),
          (e) => (failure = e),
        )
        .finally(() => {
          inflight--;
          pending.delete(p);
          const release = slot;
          slot = null;
          if (release) release();
        });
      pending.add(p);
    }
    await Promise.all(pending);
    if (failure) throw failure;
    parentPort.postMessage(total / (Number(nowNS() - start) / 1e9));
  } finally {
    await utils.release();
  }
}

async function main() {
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  const spec = JSON.parse(Buffer.concat(chunks).toString("utf8"));
  const { preset, account } = settings(spec);
  const res = { system: spec.system, scenario: spec.scenario, method: spec.method, version: version(), settings: account, completed: 0, duplicates: 0 };
  await runMigrations({ connectionString: spec.url, logger });
  const utils = await makeWorkerUtils({ connectionString: spec.url, logger });
  try {
    switch (spec.scenario) {
      case "drain":
        await drain(spec, res, preset, utils);
        break;
      case "insert":
        await insert(spec, res, utils);
        break;
      case "steady":
        await steady(spec, res, preset, utils);
        break;
      default:
        throw new Error(`unknown scenario ${spec.scenario}`);
    }
  } finally {
    await utils.release();
  }
  process.stdout.write(JSON.stringify(res) + "\n");
}

if (isMainThread && process.argv.includes("--worker")) {
  workerProcess().catch((e) => {
    console.error(`graphile worker process: ${e?.stack ?? e}`);
    process.exit(1);
  });
} else if (isMainThread) {
  main().catch((e) => {
    console.error(`graphile runner: ${e?.stack ?? e}`);
    process.exit(1);
  });
} else {
  inserterThread(workerData).catch((e) => {
    console.error(`graphile inserter: ${e?.stack ?? e}`);
    process.exit(1);
  });
}
