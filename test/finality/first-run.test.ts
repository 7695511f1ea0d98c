import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enqueueJob } from '../../src/distributed/enqueue.js';
import { openDistributedLake } from '../../src/distributed/read.js';
import { runWorker } from '../../src/distributed/worker.js';
import { parseJob } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { PRESETS } from '../../src/simulator/chain.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { startPostgres, type TestPostgres } from '../ducklake/postgres.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';
import { distributedRows, singleMachineRows } from '../distributed/helpers.js';

// Finality from a scope's first run: a job whose whole range lies within head - depth (a new contract, say) commits
// only provisional windows the first time. Its scopes get a watermark below their first block all the same
// (pipeline/committer.ts, advanceWatermark), so when the chain then reorganises, the next run fetches those windows
// again and replaces their rows, on one machine and distributed (one planner: pipeline/prepare.ts).
const H0 = PRESETS.small.visibleBlocks;
const DEPTH = 6;
/** The job's first block: its whole range, up to the head at H0, is above H0 - DEPTH. */
const FROM = H0 - 3;
const DATASETS = ['transactions', 'erc20_transfers'];

let pg: TestPostgres;
let tmp: Awaited<ReturnType<typeof tempDir>>;
const sims: RunningSimulator[] = [];
beforeAll(async () => {
  pg = await startPostgres();
  tmp = await tempDir('chainlake-finality-first-');
}, 120_000);
afterAll(async () => {
  await Promise.all(sims.map((s) => s.close()));
  await pg?.stop();
  await tmp?.cleanup();
});

const start = async (opts: Parameters<typeof startSimulator>[0]) => {
  const sim = await startSimulator({ seed: 36, ...opts });
  sims.push(sim);
  return sim;
};

const docOf = (sim: RunningSimulator, lake: string) => ({
  name: 'finality-first',
  target: 'simulator',
  lake,
  range: { incremental: true, fromBlock: FROM, safetyMarginBlocks: 2, finalityDepth: DEPTH },
  datasets: Object.fromEntries(DATASETS.map((d) => [d, { addresses: [sim.examples.whale, ...sim.examples.addresses.slice(0, 2)] }])),
});

/** Every block-ranged window of a run: all provisional at `head`, or all committed below it. */
const expectAllProvisional = (windows: Record<string, unknown>[]): void => {
  expect(windows.length).toBeGreaterThan(0);
  for (const w of windows) expect(w.status).toBe('provisional');
};

/** The clean lake: one single-machine run over a chain that never reorganised, at the new head. */
async function cleanRows(name: string): Promise<Map<string, { columns: string[]; rows: number; digest: string }>> {
  const clean = await start({});
  clean.advanceHead(3);
  const lake = path.join(tmp.dir, name);
  expect((await runJob(parseJob(docOf(clean, lake), name, process.env), { simulator: clean })).status).toBe('complete');
  return singleMachineRows(lake);
}

describe('finality from a scope first run that is all provisional', () => {
  it('one machine: the next run replaces the first run provisional windows, the lake equals a clean run at the new head', async () => {
    const sim = await start({ reorg: { at: H0, depth: 4, reach: 8 } });
    const lake = path.join(tmp.dir, 'local');
    const job = parseJob(docOf(sim, lake), 'finality-first', process.env);
    const first = await runJob(job, { simulator: sim });
    expect(first.status).toBe('complete');
    expectAllProvisional(await queryCatalog(lake, `SELECT status FROM windows WHERE run_id = '${first.runId}' AND from_block IS NOT NULL`));
    const rowsOf = async () =>
      new Set(
        (await queryCatalog(lake, `SELECT transaction_hash, block_number FROM transactions`)).map(
          (r) => `${String(r.transaction_hash)}@${String(r.block_number)}`,
        ),
      );
    const before = await rowsOf();

    sim.advanceHead(3);
    expect((await runJob(job, { simulator: sim })).status).toBe('complete');
    const want = await cleanRows('local-clean');
    const got = await singleMachineRows(lake);
    for (const d of DATASETS) {
      expect(want.get(d)!.rows, d).toBeGreaterThan(0);
      expect(got.get(d), d).toEqual(want.get(d));
    }
    // The fork's rows the first run committed are gone (they are in no block of the canonical chain).
    const after = await rowsOf();
    expect([...before].filter((r) => !after.has(r)).length).toBeGreaterThan(0);
  }, 240_000);

  it('distributed: the second enqueue replaces the first run provisional windows, the lake equals a clean run at the new head', async () => {
    const sim = await start({ reorg: { at: H0, depth: 4, reach: 8 } });
    const db = await pg.database();
    const store = path.join(tmp.dir, 'store');
    const doc = docOf(sim, path.join(tmp.dir, 'unused'));
    const job = parseJob(doc, 'finality-first-distributed', process.env);
    const cycle = async (): Promise<Record<string, unknown>[]> => {
      await enqueueJob(job, doc, { catalog: db.url, store, simulator: sim });
      const report = await runWorker({ catalog: db.url, store, simulator: sim, untilIdle: true, pollMs: 100, leaseSeconds: 30 });
      expect(report.windowsFailed).toBe(0);
      const client = await db.connect();
      try {
        const run = (await client.query(`SELECT run_id FROM chainlake.runs ORDER BY started_at DESC LIMIT 1`)).rows[0]!;
        return (await client.query(`SELECT status FROM chainlake.windows WHERE run_id = $1 AND from_block IS NOT NULL`, [run.run_id])).rows;
      } finally {
        await client.end();
      }
    };
    expectAllProvisional(await cycle());
    sim.advanceHead(3);
    await cycle();

    const want = await cleanRows('distributed-clean');
    const dist = await openDistributedLake({ catalog: db.url });
    try {
      for (const d of DATASETS) {
        const w = want.get(d)!;
        expect(w.rows, d).toBeGreaterThan(0);
        expect({ d, ...(await distributedRows(dist.conn, d, w.columns)) }).toEqual({ d, rows: w.rows, digest: w.digest });
      }
    } finally {
      dist.close();
    }
  }, 300_000);
});
