// The distributed mode's failures (issue 34): a failed window never wedges a job, a worker's exit code says what
// happened to the windows it took, the runs' status words are the single machine's, and a job key the workers do
// not carry out is refused by enqueue instead of being ignored.
import { once } from 'node:events';
import { mkdir, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enqueueJob } from '../../src/distributed/enqueue.js';
import { QUEUE_SCHEMA, setupControlPlane, WINDOW_QUEUE } from '../../src/distributed/control-plane.js';
import { DEFAULT_QUEUE_SETTINGS, openQueue } from '../../src/distributed/queue.js';
import { runWorker } from '../../src/distributed/worker.js';
import { openRun } from '../../src/distributed/worker-runs.js';
import { parseJob } from '../../src/pipeline/job.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { startPostgres, type TestPostgres } from '../ducklake/postgres.js';
import { runCliCapturing } from '../helpers/cli.js';
import { tempDir } from '../helpers/lake.js';

let pg: TestPostgres;
let tmp: Awaited<ReturnType<typeof tempDir>>;
let sim: RunningSimulator;
/** A simulator that demands a key: a worker with another key has every request refused (HTTP 403). */
let keyed: RunningSimulator;
const KEY = 'failures-test-key';

const ADDRESSES = ['0x36b8f7473cdaa8441b4aa383dd6757c5603d8b8c', '0x235cc9e6a7b9bac03056f3eb7034c30bd80a5157'];
/** A small job: one window per address (no block windows of its own: the whole range at once). */
const smallJob = (name: string) => ({
  name,
  target: 'simulator',
  range: { fromBlock: 0, toBlock: 'head' },
  concurrency: 4,
  datasets: { transactions: { addresses: ADDRESSES } },
});

/**
 * A job of the real API's kind (its URL and key from the environment), pointed at the keyed simulator. Its chain has
 * no reorganisation: finality depth 0, as the simulator's default (a real network's 64 would split each window in two).
 */
const apiJob = (name: string) => ({ ...smallJob(name), target: 'api', range: { ...smallJob(name).range, finalityDepth: 0 } });
const apiEnv = (key: string): NodeJS.ProcessEnv => ({ CHAINLAKE_MAINNET_URL: keyed.urls.mainnet, CHAINLAKE_API_KEY: key });

/** Runs `work` with these variables set (a worker reads its URL and key from its environment), then restores them. */
async function withEnv<T>(vars: NodeJS.ProcessEnv, work: () => Promise<T>): Promise<T> {
  const before = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  Object.assign(process.env, vars);
  try {
    return await work();
  } finally {
    for (const [k, v] of Object.entries(before)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

beforeAll(async () => {
  pg = await startPostgres();
  process.env.PGPASSWORD = pg.password;
  tmp = await tempDir('chainlake-failures-');
  sim = await startSimulator({ seed: 1, scale: 'small' });
  keyed = await startSimulator({ seed: 1, scale: 'small', apiKey: KEY });
}, 120_000);

afterAll(async () => {
  await sim?.close();
  await keyed?.close();
  await pg?.stop();
  await tmp?.cleanup();
});

describe("runs' status words", () => {
  it("a run ends `complete`, the single machine's word, and a control plane's `completed` rows are renamed by the setup", async () => {
    const db = await pg.database();
    const store = path.join(tmp.dir, 'store-words');
    const client = await db.connect();
    await setupControlPlane(client, `${store}/lake/`);
    // A run an earlier chainlake closed.
    await client.query(
      `INSERT INTO chainlake.runs (run_id, job, network, job_doc, job_file, range_from, ingested_at, finished_at, status)
       VALUES ('old-run', 'old', 'mainnet', '{}', 'old.json', 0, '2026-11-01T00:00:00.000Z', NOW(), 'completed')`,
    );
    const doc = smallJob('words');
    const queued = await enqueueJob(parseJob(doc, 'words.json', process.env), doc, { catalog: db.url, store, simulator: sim });
    expect(queued.queued).toBeGreaterThan(0);
    const report = await runWorker({ catalog: db.url, store, simulator: sim, id: 'words', untilIdle: true, pollMs: 50 });
    expect(report.windowsFailed).toBe(0);
    // The setup runs again on every start: renaming twice changes nothing.
    await setupControlPlane(client, `${store}/lake/`);
    const runs = (await client.query(`SELECT run_id, status, finished_at IS NOT NULL AS closed FROM chainlake.runs ORDER BY run_id`)).rows;
    expect(runs).toEqual(
      [
        { run_id: 'old-run', status: 'complete', closed: true },
        { run_id: queued.runId, status: 'complete', closed: true },
      ].sort((a, b) => a.run_id.localeCompare(b.run_id)),
    );
  }, 120_000);
});

describe('a failed window does not wedge a job', () => {
  it('a run whose windows all ended is closed; the next enqueue plans anew, --retry-failed offers the failed windows again, and an open run gets them back', async () => {
    const db = await pg.database();
    const store = path.join(tmp.dir, 'store-wedge');
    const client = await db.connect();
    const doc = apiJob('wedge');
    const job = parseJob(doc, 'wedge.json', apiEnv(KEY));
    // One attempt per window: the first failure is the window's last.
    const opts = { catalog: db.url, store, queue: { retryLimit: 0 } };
    const work = (key: string, id: string) =>
      withEnv(apiEnv(key), () => runWorker({ catalog: db.url, store, id, untilIdle: true, pollMs: 50, env: process.env }));
    const runOf = async (runId: string) =>
      (
        await client.query(
          `SELECT r.status, r.finished_at IS NOT NULL AS closed, array_agg(DISTINCT w.status ORDER BY w.status) AS states
           FROM chainlake.runs r JOIN chainlake.windows w USING (run_id) WHERE r.run_id = $1 GROUP BY 1, 2`,
          [runId],
        )
      ).rows[0];

    const first = await enqueueJob(job, doc, opts);
    expect(first.queued).toBe(2);
    // A worker whose key the API refuses: every window fails for good, and the run ends with them.
    const refused = await work('not-the-key', 'refused-1');
    expect(refused.windowsFailed).toBe(2);
    expect(await runOf(first.runId)).toEqual({ status: 'failed', closed: true, states: ['failed'] });

    // The next enqueue does not find an open run with nothing to do: it plans anew from the watermarks.
    const second = await enqueueJob(job, doc, opts);
    expect(second).toMatchObject({ resumed: false, queued: 2, retried: 0 });
    expect(second.runId).not.toBe(first.runId);
    await work('not-the-key', 'refused-2');
    expect(await runOf(second.runId)).toEqual({ status: 'failed', closed: true, states: ['failed'] });

    // --retry-failed takes the last run up again: its failed windows are queued again, each with a fresh queue job.
    const retry = await enqueueJob(job, doc, opts, { retryFailed: true });
    expect(retry).toMatchObject({ runId: second.runId, resumed: true, queued: 0, retried: 2, pending: 2 });
    expect(await runOf(second.runId)).toEqual({ status: 'running', closed: false, states: ['queued'] });
    const fixed = await work(KEY, 'fixed');
    expect(fixed).toMatchObject({ windowsFetched: 2, windowsFailed: 0 });
    expect(await runOf(second.runId)).toEqual({ status: 'complete', closed: true, states: ['committed'] });
    expect(Number((await client.query(`SELECT count(*) AS n FROM ducklake.ducklake_data_file`)).rows[0].n)).toBeGreaterThan(0);

    // A run an earlier chainlake left open with failed windows (the wedge): the next enqueue offers them again.
    await client.query(`UPDATE chainlake.runs SET finished_at = NULL, status = 'running' WHERE run_id = $1`, [first.runId]);
    const unwedged = await enqueueJob(job, doc, opts);
    expect(unwedged).toMatchObject({ runId: first.runId, resumed: true, queued: 0, retried: 2 });
    await work(KEY, 'fixed-2');
    expect(await runOf(first.runId)).toEqual({ status: 'complete', closed: true, states: ['committed'] });
    // Nothing failed is left: --retry-failed offers nothing, and the run stays as it ended.
    const nothing = await enqueueJob(job, doc, opts, { retryFailed: true });
    expect(nothing).toMatchObject({ resumed: true, queued: 0, retried: 0 });
    expect(await runOf(nothing.runId)).toMatchObject({ status: 'complete', closed: true });
  }, 180_000);
});

describe('a window whose failure only the queue kept', () => {
  // A failure outside the window's fetch (its fragment cannot be stored) is handed to the queue only, not written on
  // the window's row: status and query on a distributed lake read it from the queue's jobs (read.ts copyQueueErrors).
  it('status --catalog shows the error the worker hit, read from the queue', async () => {
    const db = await pg.database();
    const store = path.join(tmp.dir, 'store-queue-error');
    const doc = smallJob('queue-error');
    const queued = await enqueueJob(parseJob(doc, 'queue-error.json', process.env), doc, {
      catalog: db.url,
      store,
      simulator: sim,
      queue: { retryLimit: 0 },
    });
    expect(queued.queued).toBe(2);
    // A file where the store's fragments folder goes: every window's fragment fails to be written.
    await mkdir(store, { recursive: true });
    await writeFile(path.join(store, 'fragments'), '');
    const report = await runWorker({ catalog: db.url, store, simulator: sim, id: 'no-fragments', untilIdle: true, pollMs: 50 });
    expect(report.windowsFailedForGood).toBe(2);
    const client = await db.connect();
    // The windows' own rows have no error: what the user sees below can only come from the queue.
    const rows = (await client.query(`SELECT status, error FROM chainlake.windows WHERE run_id = $1`, [queued.runId])).rows;
    expect(rows).toEqual([
      { status: 'failed', error: null },
      { status: 'failed', error: null },
    ]);

    const r = await runCliCapturing(['status', '--catalog', db.url, '--format', 'json'], { PGPASSWORD: pg.password });
    expect(r.code, r.stderr).toBe(0);
    const seen = (JSON.parse(r.stdout) as { uncoveredFailures: { run_id: string; error: string | null }[] }).uncoveredFailures;
    expect(seen.map((f) => f.run_id)).toEqual([queued.runId, queued.runId]);
    expect(seen.map((f) => f.error).sort()).toEqual(report.errors.map((e) => e.error).sort());
    for (const f of seen) expect(f.error).toContain(path.join(store, 'fragments'));
  }, 120_000);
});

describe('a window of a run the control plane no longer has', () => {
  it('fails with a ControlPlaneError naming the run and its fix, and the worker goes on', async () => {
    const db = await pg.database();
    const store = path.join(tmp.dir, 'store-run-gone');
    const doc = smallJob('run-gone');
    const opts = { catalog: db.url, store, simulator: sim, queue: { retryLimit: 0 } };
    const gone = await enqueueJob(parseJob(doc, 'run-gone.json', process.env), doc, opts);
    const kept = await enqueueJob(parseJob({ ...doc, name: 'run-kept' }, 'run-kept.json', process.env), { ...doc, name: 'run-kept' }, opts);
    expect([gone.queued, kept.queued]).toEqual([2, 2]);
    const client = await db.connect();
    // The run's row is gone while the queue keeps its window jobs (a control plane restored from an older backup).
    await client.query(`DELETE FROM chainlake.runs WHERE run_id = $1`, [gone.runId]);
    await expect(openRun(client, gone.runId, opts, () => undefined)).rejects.toMatchObject({
      code: 'CHAINLAKE_CONTROL_PLANE',
      hint: expect.stringContaining('chainlake enqueue plans the job anew'),
    });

    const report = await runWorker({ catalog: db.url, store, simulator: sim, id: 'run-gone', untilIdle: true, pollMs: 50 });
    expect(report).toMatchObject({ windowsFetched: 2, windowsFailedForGood: 2, status: 'partial' });
    expect(report.errors.map((e) => e.run)).toEqual([gone.runId, gone.runId]);
    for (const e of report.errors)
      expect(e.error).toBe(`run ${gone.runId} is not in the control plane: the queue offered a window of it, but chainlake.runs has no such run`);
    const states = (await client.query(`SELECT state, count(*)::int AS n FROM ${QUEUE_SCHEMA}.job WHERE name = $1 GROUP BY 1 ORDER BY 1`, [WINDOW_QUEUE])).rows;
    expect(states).toEqual([
      { state: 'completed', n: 2 },
      { state: 'failed', n: 2 },
    ]);
    expect((await client.query(`SELECT status FROM chainlake.runs WHERE run_id = $1`, [kept.runId])).rows).toEqual([{ status: 'complete' }]);

    // Alone, such windows are what the worker's exit says a person must fix, with the hint.
    const only = await enqueueJob(parseJob(doc, 'run-gone.json', process.env), doc, opts);
    await client.query(`DELETE FROM chainlake.runs WHERE run_id = $1`, [only.runId]);
    const alone = await runWorker({ catalog: db.url, store, simulator: sim, id: 'run-gone-2', untilIdle: true, pollMs: 50 });
    expect(alone).toMatchObject({ windowsFetched: 0, windowsFailedForGood: 2, status: 'failed' });
    expect(alone.setupProblem?.hint).toContain('chainlake enqueue plans the job anew');
  }, 120_000);
});

/** A loopback HTTP server for the test; closed after the file. */
const servers: Server[] = [];
afterAll(() => servers.forEach((s) => s.close()));
async function listen(handler: Parameters<typeof createServer>[1]): Promise<string> {
  const server = createServer(handler);
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** A loopback port nothing listens on: bound, then released. */
async function refusedUrl(): Promise<string> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  await new Promise((r) => server.close(r));
  return `http://127.0.0.1:${port}`;
}

describe('worker --until-idle exits with the README codes', () => {
  // Requests fail fast: an outage "longer than the retries" without waiting for the default backoff.
  const FAST_RETRY = { maxAttempts: 2, baseDelayMs: 5, maxDelayMs: 10 };

  /** A database with the small job enqueued (against the keyed simulator, with the right key), each window tried twice. */
  async function enqueued(name: string) {
    const db = await pg.database();
    const store = path.join(tmp.dir, `store-${name}`);
    const doc = { ...apiJob(name), retry: FAST_RETRY };
    const file = path.join(tmp.dir, `${name}.json`);
    await writeFile(file, JSON.stringify(doc));
    const r = await enqueueJob(parseJob(doc, file, apiEnv(KEY)), doc, { catalog: db.url, store, queue: { retryLimit: 1 } });
    expect(r.queued).toBe(2);
    return { db, store, file };
  }
  /**
   * The worker command run in this process (its exit code and what it prints are the point, not its process), with
   * the URL and key of `env` and no other: none of this process's own.
   */
  const worker = (db: { url: string }, store: string, env: NodeJS.ProcessEnv) =>
    runCliCapturing(['worker', '--catalog', db.url, '--store', store, '--until-idle', '--poll-ms', '50'], {
      CHAINLAKE_API_KEY: '',
      CHAINLAKE_MAINNET_URL: '',
      PGPASSWORD: pg.password,
      ...env,
    });

  it('2 when the API refuses the key on every request, naming CHAINLAKE_API_KEY and never printing the key', async () => {
    const { db, store } = await enqueued('exit-refused');
    const r = await worker(db, store, apiEnv('wrong-key-5e1f'));
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/every window worker \S+ took failed: .*HTTP 403/);
    expect(r.stderr).toMatch(/hint: .*CHAINLAKE_API_KEY/);
    expect(r.stderr + r.stdout).not.toContain('wrong-key-5e1f');
  }, 180_000);

  it('2 when nothing answers at the API address, naming the address and CHAINLAKE_MAINNET_URL', async () => {
    const { db, store } = await enqueued('exit-unreachable');
    const url = await refusedUrl();
    const r = await worker(db, store, { CHAINLAKE_MAINNET_URL: url, CHAINLAKE_API_KEY: KEY });
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toContain(`nothing answers at ${url}`);
    expect(r.stderr).toMatch(/hint: .*CHAINLAKE_MAINNET_URL/);
  }, 180_000);

  it('1 when windows failed against an API that answers with errors; 0 once --retry-failed and a worker commit them', async () => {
    const { db, store, file } = await enqueued('exit-failed');
    const busy = await listen((_req, res) => {
      res.writeHead(503, { 'content-type': 'application/json' });
      res.end('{"status":"0","message":"busy","results":null}');
    });
    const failed = await worker(db, store, { CHAINLAKE_MAINNET_URL: busy, CHAINLAKE_API_KEY: KEY });
    expect(failed.code, failed.stderr).toBe(1);
    expect(failed.stderr).not.toMatch(/nothing answers|every window/);

    const env = { PGPASSWORD: pg.password, ...apiEnv(KEY) };
    const retry = await runCliCapturing(['enqueue', file, '--catalog', db.url, '--store', store, '--retry-failed'], env);
    expect(retry.code, retry.stderr).toBe(0);
    expect(JSON.parse(retry.stdout)).toMatchObject({ resumed: true, queued: 0, retried: 2, pending: 2 });
    const fixed = await worker(db, store, apiEnv(KEY));
    expect(fixed.code, fixed.stderr).toBe(0);
  }, 240_000);
});

describe('a window held by a worker that died', () => {
  it('is offered again within a minute (its worker stopped beating), not after the window timeout', async () => {
    const db = await pg.database();
    const store = path.join(tmp.dir, 'store-dead');
    const doc = smallJob('dead-holder');
    // The default window timeout: a quarter of an hour, far beyond this test's bound.
    const queued = await enqueueJob(parseJob(doc, 'dead.json', process.env), doc, { catalog: db.url, store, simulator: sim });
    expect(queued.queued).toBe(2);
    // A worker takes a window, records it, and dies: its last sign of life a minute ago.
    const boss = await openQueue(db.url, DEFAULT_QUEUE_SETTINGS, false);
    const [taken] = await boss.fetch(WINDOW_QUEUE, { batchSize: 1 });
    await boss.stop({ graceful: false, close: true, wait: true });
    expect(taken).toBeDefined();
    const client = await db.connect();
    await client.query(`INSERT INTO chainlake.workers (worker, seen_at) VALUES ('dead', NOW() - interval '1 minute')`);
    await client.query(`INSERT INTO chainlake.holds (job_id, worker) VALUES ($1, 'dead')`, [taken!.id]);

    const started = Date.now();
    const report = await runWorker({ catalog: db.url, store, simulator: sim, id: 'alive', untilIdle: true, pollMs: 50 });
    // Without liveness the worker waits for the window's expiry (15 minutes): the test's bound ends it first.
    expect(Date.now() - started).toBeLessThan(60_000);
    expect(report).toMatchObject({ windowsFetched: 2, windowsFailedForGood: 0 });
    const states = (await client.query(`SELECT status FROM chainlake.windows WHERE run_id = $1`, [queued.runId])).rows.map((r) => r.status);
    expect(states).toEqual(['committed', 'committed']);
    // A clean stop leaves nothing to watch.
    expect((await client.query(`SELECT worker FROM chainlake.workers ORDER BY worker`)).rows).toEqual([{ worker: 'dead' }]);
  }, 90_000);
});
