// `verify --repair` keeps finality: a repaired window that reaches into the unfinal zone (above head − depth) is
// committed as provisional, as the run's planner would commit it (prepare.ts atFinality, one decision for both), so
// the next run fetches it again; recorded `committed` it would never be fetched again. On both kinds of lake.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enqueueJob } from '../../src/distributed/enqueue.js';
import { runWorker } from '../../src/distributed/worker.js';
import { parseJob, type Job } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { verifySession, type VerifyTarget } from '../../src/pipeline/verify/session.js';
import { PRESETS } from '../../src/simulator/chain.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { referenceMissing, withReference } from '../ducklake/helpers.js';
import { startPostgres, type TestPostgres } from '../ducklake/postgres.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';

const H0 = PRESETS.small.visibleBlocks;
const DEPTH = 6;
const missing = referenceMissing();

let sim: RunningSimulator;
let pg: TestPostgres | undefined;
let tmp: Awaited<ReturnType<typeof tempDir>>;

beforeAll(async () => {
  sim = await startSimulator({ seed: 1, scale: 'small' });
  tmp = await tempDir('chainlake-repair-finality-');
}, 120_000);
afterAll(async () => {
  await sim?.close();
  await pg?.stop();
  await tmp?.cleanup();
});

const docOf = (name: string, lake: string) => ({
  name,
  network: 'mainnet',
  target: 'simulator',
  simulator: { seed: 1, scale: 'small' },
  lake,
  range: { incremental: true, fromBlock: H0 - 300, safetyMarginBlocks: 2, finalityDepth: DEPTH },
  datasets: { transactions: { addresses: [sim.examples.whale] } },
});

type Windows = Record<string, unknown>[];

/** What the test does with a lake, whichever kind: export (a run), the ledger's windows of a run, where another writer writes. */
interface Lake {
  job: Job;
  target: VerifyTarget;
  doc: unknown;
  /** Runs the job once into the lake; its run id. */
  run(): Promise<string>;
  windowsOf(runId: string): Promise<Windows>;
  /** The catalog the reference extension attaches (another DuckLake writer). */
  refCatalog: string;
  /** A distributed lake's control plane: the rows of `sql`. */
  query?: (sql: string, values?: unknown[]) => Promise<Record<string, unknown>[]>;
}

function localLake(): Lake {
  const lake = path.join(tmp.dir, 'local');
  const doc = docOf('repair-finality-local', lake);
  const job = parseJob(doc, 'repair-finality', process.env);
  return {
    job,
    doc,
    target: { kind: 'local', lake },
    refCatalog: path.join(lake, 'catalog.duckdb'),
    run: async () => {
      const r = await runJob(job, { simulator: sim });
      expect(r.status).toBe('complete');
      return r.runId;
    },
    windowsOf: (runId) =>
      queryCatalog(lake, `SELECT from_block, to_block, status FROM windows WHERE run_id = '${runId}' AND from_block IS NOT NULL ORDER BY from_block`),
  };
}

async function distributedLake(): Promise<Lake> {
  const server = (pg ??= await startPostgres());
  const db = await server.database();
  const store = path.join(tmp.dir, 'store');
  const doc = docOf('repair-finality-distributed', path.join(tmp.dir, 'unused'));
  const job = parseJob(doc, 'repair-finality', process.env);
  const query = async (sql: string, values: unknown[] = []) => {
    const c = await db.connect();
    try {
      return (await c.query(sql, values)).rows as Record<string, unknown>[];
    } finally {
      await c.end();
    }
  };
  return {
    job,
    doc,
    target: { kind: 'distributed', catalog: db.url, store },
    refCatalog: db.url,
    query,
    run: async () => {
      const { runId } = await enqueueJob(job, doc, { catalog: db.url, store, simulator: sim });
      const worked = await runWorker({ catalog: db.url, store, id: 'w', untilIdle: true, pollMs: 50, simulator: sim });
      expect(worked.windowsFailed).toBe(0);
      return runId;
    },
    windowsOf: (runId) =>
      query(`SELECT from_block, to_block, status FROM chainlake.windows WHERE run_id = $1 AND from_block IS NOT NULL ORDER BY from_block`, [runId]),
  };
}

/** Every window reaching above `final` is provisional, every other one committed; at least one is provisional. */
function expectFinality(windows: Windows, final: number): void {
  expect(windows.length).toBeGreaterThan(0);
  for (const w of windows) expect(w.status, `${w.from_block}-${w.to_block}`).toBe(Number(w.to_block) > final ? 'provisional' : 'committed');
  expect(windows.some((w) => w.status === 'provisional')).toBe(true);
}

/** Exports the lake, lets another writer delete a row of its provisional window, and repairs it; the repair's session. */
async function repairedOnce(lake: Lake, beforeRepair: () => Promise<void> = async () => undefined) {
  const first = await lake.windowsOf(await lake.run());
  const head = Math.max(...first.map((w) => Number(w.to_block)));
  const final = head - DEPTH;
  expectFinality(first, final);

  // Another writer deletes a row of the provisional window: that window differs.
  const above = `block_number > ${final}`;
  const held = async () => Number((await withReference(lake.refCatalog, [`SELECT count(*) AS n FROM ref.transactions WHERE ${above}`]))[0]!.n);
  const before = await held();
  expect(before).toBeGreaterThan(0);
  await withReference(lake.refCatalog, [
    `DELETE FROM ref.transactions WHERE transaction_hash IN (SELECT transaction_hash FROM ref.transactions WHERE ${above} ORDER BY transaction_hash LIMIT 1)`,
  ]);
  expect(await held()).toBe(before - 1);

  await beforeRepair();
  const s = await verifySession(lake.job, lake.target, {}, { simulator: sim, repair: true, doc: lake.doc, env: process.env });
  expect(s.beforeRepair?.differing.length).toBeGreaterThan(0);
  expect(s.beforeRepair!.differing.every((w) => w.range !== undefined && w.range.to > final)).toBe(true);
  expect(s.repair?.status).toBe('complete');
  expect(s.holds).toBe(true);
  expect(await held()).toBe(before);
  return { s, head, final };
}

async function repairKeepsFinality(lake: Lake): Promise<void> {
  const { s, head, final } = await repairedOnce(lake);
  // The repaired window is still provisional: committed as final, no run would ever fetch it again.
  expectFinality(await lake.windowsOf(s.repair!.runId), final);

  // The next run fetches the provisional blocks again (and replaces their rows): they are in its windows.
  const next = await lake.windowsOf(await lake.run());
  expect(next.some((w) => Number(w.from_block) <= final + 1 && Number(w.to_block) === head)).toBe(true);
  expectFinality(next, final);
}

describe.skipIf(missing !== null)(`verify --repair with a finality depth${missing ? ` (${missing})` : ''}`, { timeout: 300_000 }, () => {
  it('a local lake: the repaired window reaching above head − depth stays provisional, and the next run fetches it again', async () => {
    await repairKeepsFinality(localLake());
  });

  it('a distributed lake: the same, through the repair run of the control plane', async () => {
    await repairKeepsFinality(await distributedLake());
  });

  it("a distributed repair works only its own run's windows: another job's queued window stays queued, untouched", async () => {
    const lake = await distributedLake();
    const q = lake.query!;
    const target = lake.target as Extract<VerifyTarget, { kind: 'distributed' }>;
    // Another job of the same control plane, enqueued while no worker runs: its windows wait in the queue.
    const otherDoc = { ...docOf('repair-other-job', path.join(tmp.dir, 'unused')), datasets: { transactions: { addresses: [sim.examples.addresses[0]!] } } };
    let other = '';
    const { s } = await repairedOnce(lake, async () => {
      other = (
        await enqueueJob(parseJob(otherDoc, 'repair-other-job', process.env), otherDoc, { catalog: target.catalog, store: target.store!, simulator: sim })
      ).runId;
    });
    expect(s.repair?.status).toBe('complete');
    const windows = await q(
      `SELECT w.status, w.worker, w.attempts, j.state FROM chainlake.windows w JOIN chainlake_queue.job j ON j.id = w.job_id WHERE w.run_id = $1`,
      [other],
    );
    expect(windows.length).toBeGreaterThan(0);
    for (const w of windows) expect(w).toEqual({ status: 'queued', worker: null, attempts: 0, state: 'created' });
    expect(await q(`SELECT 1 FROM chainlake.requests WHERE run_id = $1`, [other])).toEqual([]);
    expect(await q(`SELECT finished_at FROM chainlake.runs WHERE run_id = $1`, [other])).toEqual([{ finished_at: null }]);
  });
});
