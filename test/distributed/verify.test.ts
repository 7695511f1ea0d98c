// `chainlake verify` on a distributed lake (PostgreSQL control plane + store): the same module reads its windows
// and rows through the distributed reader, asks the API, and records its findings in the control plane's
// `chainlake.verifications` and its requests in `chainlake.request_usage`. A lake another DuckLake writer deleted
// rows from and added a row to differs (exit 5); --repair fetches exactly those windows again as a run of their own,
// worked in-process by the mode's worker and committer, one snapshot that replaces their rows (the added row is
// gone); verify holds after, and the rows equal a fresh export's.
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { enqueueJob } from '../../src/distributed/enqueue.js';
import { runWorker } from '../../src/distributed/worker.js';
import { openDistributedLake } from '../../src/distributed/read.js';
import { parseJob } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { verifySession } from '../../src/pipeline/verify/session.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { startPostgres, type TestPostgres } from '../ducklake/postgres.js';
import { referenceMissing, withReference } from '../ducklake/helpers.js';
import { runCliCapturing } from '../helpers/cli.js';
import { tempDir } from '../helpers/lake.js';
import { distributedRows, singleMachineRows } from './helpers.js';

const A = '0x36b8f7473cdaa8441b4aa383dd6757c5603d8b8c';
let pg: TestPostgres;
let sim: RunningSimulator;
let tmp: Awaited<ReturnType<typeof tempDir>>;

beforeAll(async () => {
  pg = await startPostgres();
  sim = await startSimulator({ seed: 1, scale: 'small' });
  tmp = await tempDir('chainlake-verify-distributed-');
}, 120_000);
afterAll(async () => {
  await sim?.close();
  await pg?.stop();
  await tmp?.cleanup();
});

/** A's transactions of blocks 0 to the head, in 12,000-block windows, enqueued and worked into a new distributed lake. */
async function exportedLake(name: string, windowBlocks = 12000) {
  const db = await pg.database();
  const store = path.join(tmp.dir, `store-${name}`);
  const doc = {
    name,
    network: 'mainnet',
    target: 'simulator',
    simulator: { seed: 1, scale: 'small' },
    range: { fromBlock: 0, toBlock: 'head', windowBlocks },
    datasets: { transactions: { addresses: [A] } },
  };
  const job = parseJob(doc, name, process.env);
  await enqueueJob(job, doc, { catalog: db.url, store, simulator: sim });
  await runWorker({ catalog: db.url, store, id: 'w', untilIdle: true, pollMs: 50, simulator: sim });
  return { db, store, doc, job };
}

/**
 * The export the first two tests share (the first only reads it and records its findings under its own verify id;
 * the second changes it): made once, by whichever runs first.
 */
let shared: ReturnType<typeof exportedLake> | undefined;
const sharedLake = () => (shared ??= exportedLake('dist-repair'));

it('a distributed lake verifies: every window held, findings and requests in the control plane', async () => {
  const { db, store, job } = await sharedLake();

  const target = { kind: 'distributed', catalog: db.url, store } as const;
  // Its requests count against the named account whose key it sends, as a worker's (verify --catalog --account).
  const s = await verifySession(job, target, {}, { simulator: sim, account: 'verifier' });
  expect(s.rows.filter((r) => r.status === 'differs')).toEqual([]);
  const counts = s.rows.filter((r) => r.check === 'count');
  // Blocks 0-36000 in 12,000-block chunks: four windows, asked as one range.
  expect(counts.length).toBe(4);
  expect(counts.every((r) => r.status === 'held')).toBe(true);
  expect(s.requests).toBe(1);

  const c = await db.connect();
  try {
    const recorded = (await c.query(`SELECT status, count(*)::int AS n FROM chainlake.verifications WHERE verify_id = $1 GROUP BY status`, [s.verifyId])).rows;
    expect(recorded).toEqual([{ status: 'held', n: s.rows.length }]);
    const usage = (await c.query(`SELECT requests::int AS requests FROM chainlake.request_usage WHERE account = 'verifier'`)).rows;
    expect(usage).toEqual([{ requests: s.requests }]);
  } finally {
    await c.end();
  }
}, 300_000);

const missing = referenceMissing();

it.skipIf(missing !== null)(
  `rows deleted and a row added by another writer: verify --catalog exits 5, --repair fetches those windows alone and replaces their rows in one snapshot, then verify holds${missing ? ` (${missing})` : ''}`,
  async () => {
    const { db, store, doc } = await sharedLake();
    // Two rows of one window gone, and in the next window a row the API does not list: a copy of one of A's
    // transactions under a hash no chain holds.
    const ghost = `0x${'e'.repeat(64)}`;
    await withReference(db.url, [
      `DELETE FROM ref.transactions WHERE transaction_hash IN (SELECT transaction_hash FROM ref.transactions
       WHERE sender = '${A}' AND block_number BETWEEN 12000 AND 23999 ORDER BY transaction_hash LIMIT 2)`,
      `INSERT INTO ref.transactions SELECT * REPLACE ('${ghost}' AS transaction_hash) FROM ref.transactions
       WHERE sender = '${A}' AND block_number BETWEEN 24000 AND 35999 ORDER BY transaction_hash LIMIT 1`,
    ]);
    const ghosts = async () => (await withReference(db.url, [`SELECT count(*) AS n FROM ref.transactions WHERE transaction_hash = '${ghost}'`]))[0]!.n;
    expect(await ghosts()).toBe(1n);
    const c = await db.connect();
    const q = async (sql: string, values: unknown[] = []) => (await c.query(sql, values)).rows as Record<string, unknown>[];
    try {
      // The commands as a user runs them (the job's embedded simulator is the same chain), in this process: their
      // reports and exit codes are the point, not a process of their own.
      const jobFile = path.join(tmp.dir, 'dist-repair.json');
      await writeFile(jobFile, JSON.stringify(doc));
      const lakeArgs = ['--catalog', db.url, '--store', store, '--format', 'json'];
      const window = `transactions/mainnet/address=${A}/12000-23999`;
      const extra = `transactions/mainnet/address=${A}/24000-35999`;
      const differs = await runCliCapturing(['verify', jobFile, ...lakeArgs]);
      expect(differs.code, differs.stderr).toBe(5);
      expect(JSON.parse(differs.stdout).differing).toEqual([window, extra]);

      const snapshotsBefore = Number((await q(`SELECT max(snapshot_id) AS s FROM ducklake.ducklake_snapshot`))[0]!.s);
      const repaired = await runCliCapturing(['verify', jobFile, ...lakeArgs, '--repair']);
      expect(repaired.code, repaired.stderr).toBe(0);
      const r = JSON.parse(repaired.stdout);
      expect(r.beforeRepair.differing).toEqual([window, extra]);
      expect(r.holds).toBe(true);
      expect(r.repair.status).toBe('complete');
      // One snapshot, the only one the repair made; its run's windows are the two that differed, in the ledger
      // with the requests that fetched them (lineage). The window fetched again replaced its rows: the one the
      // API does not list is gone.
      expect(r.repair.snapshots).toHaveLength(1);
      expect(Number((await q(`SELECT max(snapshot_id) AS s FROM ducklake.ducklake_snapshot`))[0]!.s)).toBe(r.repair.snapshots[0]);
      expect(r.repair.snapshots[0]).toBeGreaterThan(snapshotsBefore);
      const windows = await q(`SELECT window_id, status, snapshot_id::int AS snapshot FROM chainlake.windows WHERE run_id = $1 ORDER BY window_id`, [
        r.repair.runId,
      ]);
      expect(windows).toEqual([
        { window_id: window, status: 'committed', snapshot: r.repair.snapshots[0] },
        { window_id: extra, status: 'committed', snapshot: r.repair.snapshots[0] },
      ]);
      expect(await ghosts()).toBe(0n);
      expect(
        Number((await q(`SELECT count(*) AS n FROM chainlake.requests WHERE window_id = $1 AND run_id = $2`, [window, r.repair.runId]))[0]!.n),
      ).toBeGreaterThan(0);

      const after = await runCliCapturing(['verify', jobFile, ...lakeArgs]);
      expect(after.code, after.stderr).toBe(0);
      expect(JSON.parse(after.stdout).holds).toBe(true);
    } finally {
      await c.end();
    }

    // The lake's rows equal a fresh export's of the same job.
    const fresh = path.join(tmp.dir, 'fresh');
    expect((await runJob(parseJob({ ...doc, lake: fresh }, 'fresh', process.env), { simulator: sim })).status).toBe('complete');
    const expected = (await singleMachineRows(fresh)).get('transactions')!;
    const lake = await openDistributedLake({ catalog: db.url, store });
    try {
      expect(await distributedRows(lake.conn, 'transactions', expected.columns)).toEqual({ rows: expected.rows, digest: expected.digest });
    } finally {
      lake.close();
    }
  },
  600_000,
);

it.skipIf(missing !== null)(
  `a repair of more windows than one commit batch takes: one snapshot${missing ? ` (${missing})` : ''}`,
  async () => {
    // 1,000-block windows, a row gone from each window holding one of A's transactions: more windows than the repair
    // fetches at once (a commit between two of them would split it). The repair's worker commits once, when every
    // window is fetched, without the bound on a commit's windows (COMMIT_WINDOWS) a worker's batches have.
    const { db, store, doc, job } = await exportedLake('dist-repair-many', 1000);
    await withReference(db.url, [
      `DELETE FROM ref.transactions WHERE transaction_hash IN (SELECT min(transaction_hash) FROM ref.transactions
       WHERE sender = '${A}' GROUP BY block_number // 1000)`,
    ]);
    const target = { kind: 'distributed', catalog: db.url, store } as const;
    const s = await verifySession(job, target, {}, { simulator: sim, repair: true, doc, env: process.env });
    expect(s.beforeRepair!.differing.length).toBeGreaterThan(16);
    expect(s.holds).toBe(true);
    expect(s.repair!.snapshots).toHaveLength(1);
  },
  600_000,
);

it.skipIf(missing !== null)(
  `another job's window fetched and waiting while a repair runs: the repair's snapshot holds only its own windows, an ordinary worker commits the other later${missing ? ` (${missing})` : ''}`,
  async () => {
    const { db, store, doc, job } = await exportedLake('dist-repair-beside');
    await withReference(db.url, [
      `DELETE FROM ref.transactions WHERE transaction_hash IN (SELECT transaction_hash FROM ref.transactions
       WHERE sender = '${A}' AND block_number BETWEEN 12000 AND 23999 ORDER BY transaction_hash LIMIT 1)`,
    ]);
    // Another job's one window, fetched by a worker whose commit failed before COMMIT: fetched, waiting for a committer.
    // Another busy address than A's, as small (the whale's tens of thousands of rows were fetched and committed here
    // for nothing: the window's size is not the point).
    const other = sim.examples.addresses.find((a) => a.toLowerCase() !== A)!;
    expect(other).toBeDefined();
    const otherDoc = {
      ...doc,
      name: 'dist-repair-other',
      range: { fromBlock: 0, toBlock: 'head', windowBlocks: 100_000 },
      datasets: { transactions: { addresses: [other] } },
    };
    const otherRun = await enqueueJob(parseJob(otherDoc, 'dist-repair-other', process.env), otherDoc, { catalog: db.url, store, simulator: sim });
    const failed = new Error('the committer stopped before COMMIT');
    const stopped = runWorker({
      catalog: db.url,
      store,
      id: 'w-other',
      untilIdle: true,
      pollMs: 50,
      simulator: sim,
      beforeCommit: async () => {
        throw failed;
      },
    });
    await expect(stopped).rejects.toBe(failed);
    const c = await db.connect();
    const windowsOf = async (runId: string) =>
      (await c.query(`SELECT window_id, status, snapshot_id::int AS snapshot FROM chainlake.windows WHERE run_id = $1 ORDER BY window_id`, [runId])).rows as {
        window_id: string;
        status: string;
        snapshot: number | null;
      }[];
    try {
      const waiting = await windowsOf(otherRun.runId);
      expect(waiting.length).toBe(1);
      expect(waiting[0]!.status).toBe('fetched');

      const target = { kind: 'distributed', catalog: db.url, store } as const;
      const s = await verifySession(job, target, {}, { simulator: sim, repair: true, doc, env: process.env });
      expect(s.holds).toBe(true);
      expect(s.repair!.snapshots).toHaveLength(1);
      const snapshot = s.repair!.snapshots![0]!;
      // The repair's snapshot: its own window, and nothing of the other job's.
      expect(await windowsOf(s.repair!.runId)).toEqual([{ window_id: `transactions/mainnet/address=${A}/12000-23999`, status: 'committed', snapshot }]);
      expect(await windowsOf(otherRun.runId)).toEqual([{ ...waiting[0]!, status: 'fetched', snapshot: null }]);
      const inSnapshot = (await c.query(`SELECT DISTINCT run_id FROM chainlake.windows WHERE snapshot_id = $1`, [snapshot])).rows.map((r) => r.run_id);
      expect(inSnapshot).toEqual([s.repair!.runId]);

      // An ordinary worker commits the other job's window, in a later snapshot.
      const worked = await runWorker({ catalog: db.url, store, id: 'w-later', untilIdle: true, pollMs: 50, simulator: sim });
      expect(worked.windowsCommitted).toBe(1);
      const later = await windowsOf(otherRun.runId);
      expect(later).toEqual([{ ...waiting[0]!, status: 'committed', snapshot: expect.any(Number) }]);
      expect(later[0]!.snapshot).toBeGreaterThan(snapshot);
    } finally {
      await c.end();
    }
  },
  600_000,
);
