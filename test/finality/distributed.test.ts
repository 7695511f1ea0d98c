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
import { tempDir } from '../helpers/lake.js';
import { distributedRows, singleMachineRows } from '../distributed/helpers.js';

// Finality in distributed mode: the same planner and the same replacement (load/write/replace.ts) as one machine.
const H0 = PRESETS.small.visibleBlocks;
const DEPTH = 6;
const DATASETS = ['transactions', 'erc20_transfers'];

let pg: TestPostgres;
let tmp: Awaited<ReturnType<typeof tempDir>>;
const sims: RunningSimulator[] = [];
beforeAll(async () => {
  pg = await startPostgres();
  tmp = await tempDir('chainlake-finality-');
}, 120_000);
afterAll(async () => {
  await Promise.all(sims.map((s) => s.close()));
  await pg?.stop();
  await tmp?.cleanup();
});

const docOf = (sim: RunningSimulator, lake: string) => {
  const addresses = [sim.examples.whale, ...sim.examples.addresses.slice(0, 2)];
  return {
    name: 'finality',
    target: 'simulator',
    lake,
    range: { incremental: true, fromBlock: H0 - 300, safetyMarginBlocks: 2, finalityDepth: DEPTH },
    datasets: Object.fromEntries(DATASETS.map((d) => [d, { addresses }])),
  };
};

type Doc = ReturnType<typeof docOf> | ReturnType<typeof logsDocOf>;

const logsDocOf = (sim: RunningSimulator, lake: string) => ({
  name: 'finality-logs',
  target: 'simulator',
  lake,
  range: { incremental: true, fromBlock: H0 - 300, safetyMarginBlocks: 2, finalityDepth: DEPTH },
  // One contract as two scopes (all its logs, its Transfers: the real dialect lists logs without topics).
  datasets: { event_logs: { contracts: [{ address: sim.examples.erc20Token }, { address: sim.examples.erc20Token, topics: [sim.examples.transferTopic] }] } },
  // Decoded in the committer's transaction: the rows of a reorganised log go with it.
  decode: { standard: ['erc20'] },
});

/**
 * Two enqueue-and-work cycles over a chain that reorganises its head between them, then the lake against one clean
 * single-machine run at the new head.
 */
async function reorganisedTwice(opts: { dialect?: 'real' }, docFor: (sim: RunningSimulator, lake: string) => Doc, datasets: readonly string[]): Promise<void> {
  const sim = await startSimulator({ seed: 36, ...opts, reorg: { at: H0, depth: 4, reach: 8 } });
  sims.push(sim);
  const db = await pg.database();
  const store = path.join(tmp.dir, `store-${datasets.join('-')}`);
  const doc = docFor(sim, path.join(tmp.dir, 'unused'));
  const job = parseJob(doc, 'finality-distributed', process.env);
  const cycle = async (head: number) => {
    await enqueueJob(job, doc, { catalog: db.url, store, simulator: sim });
    const report = await runWorker({ catalog: db.url, store, simulator: sim, untilIdle: true, pollMs: 100, leaseSeconds: 30 });
    expect(report.windowsFailed).toBe(0);
    const client = await db.connect();
    const q = (sql: string, values: unknown[] = []) => client.query(sql, values).then((r) => r.rows as Record<string, unknown>[]);
    const marks = await q(`SELECT block FROM chainlake.watermarks`).finally(() => undefined);
    expect(marks.length).toBeGreaterThan(0);
    for (const m of marks) expect(Number(m.block)).toBeLessThanOrEqual(head - DEPTH);
    const run = (await q(`SELECT run_id FROM chainlake.runs ORDER BY started_at DESC LIMIT 1`))[0]!;
    const windows = await q(`SELECT to_block, status FROM chainlake.windows WHERE run_id = $1`, [run.run_id]);
    await client.end();
    for (const w of windows) expect(w.status).toBe(Number(w.to_block) > head - DEPTH ? 'provisional' : 'committed');
    expect(windows.some((w) => w.status === 'provisional')).toBe(true);
  };
  await cycle(H0);
  sim.advanceHead(3);
  await cycle(H0 + 3);

  const clean = await startSimulator({ seed: 36, ...opts });
  sims.push(clean);
  clean.advanceHead(3);
  const lake = path.join(tmp.dir, `clean-${datasets.join('-')}`);
  await runJob(parseJob(docFor(clean, lake), 'finality-clean', process.env), { simulator: clean });
  const expected = await singleMachineRows(lake);
  const dist = await openDistributedLake({ catalog: db.url });
  try {
    for (const name of datasets) {
      const want = expected.get(name)!;
      expect(want.rows).toBeGreaterThan(0);
      expect({ name, ...(await distributedRows(dist.conn, name, want.columns)) }).toEqual({ name, rows: want.rows, digest: want.digest });
    }
  } finally {
    dist.close();
  }
}

describe('finality, distributed', () => {
  it('a reorganised head: the second enqueue replaces the provisional windows, as one clean run at the new head', async () => {
    await reorganisedTwice({}, docOf, DATASETS);
  }, 300_000);

  it('event_logs, whose rows carry no block: the reorganised logs and their decoded rows are gone, as one clean run at the new head', async () => {
    await reorganisedTwice({ dialect: 'real' }, logsDocOf, ['event_logs', 'erc20_transfer_events']);
  }, 300_000);
});
