import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { setupControlPlane } from '../../src/distributed/control-plane.js';
import { enqueueJob } from '../../src/distributed/enqueue.js';
import { runWorker } from '../../src/distributed/worker.js';
import { estimatePlan, type PlanEstimate } from '../../src/pipeline/estimate.js';
import { parseJob } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { startPostgres, type TestPostgres } from '../ducklake/postgres.js';
import { runCliInProcess } from '../helpers/cli.js';
import { tempDir } from '../helpers/lake.js';

/**
 * `chainlake plan --catalog` lists the windows `enqueue` then queues: both plan with the single machine's planner
 * (prepareRun) on the control plane's ledger, as `run` and `plan` do on a local lake's.
 */

let pg: TestPostgres;
let sim: RunningSimulator;
let tmp: Awaited<ReturnType<typeof tempDir>>;
const saved = { key: process.env.CHAINLAKE_API_KEY, password: process.env.PGPASSWORD };

beforeAll(async () => {
  pg = await startPostgres();
  sim = await startSimulator({ seed: 1, scale: 'small' });
  tmp = await tempDir('chainlake-plan-dist-');
  process.env.PGPASSWORD = pg.password;
  process.env.CHAINLAKE_API_KEY = sim.apiKey;
}, 120_000);

afterAll(async () => {
  for (const [name, value] of [
    ['CHAINLAKE_API_KEY', saved.key],
    ['PGPASSWORD', saved.password],
  ] as const) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
  await sim?.close();
  await pg?.stop();
  await tmp?.cleanup();
});

/** An incremental job with an unfinal zone: its second run fetches the provisional windows and the margin again. */
const jobDoc = (lake: string) => ({
  name: 'dist-plan',
  target: 'api',
  endpoints: { mainnet: sim.urls.mainnet },
  lake,
  concurrency: 2,
  range: { fromBlock: 0, incremental: true, windowBlocks: 4_000, finalityDepth: 500 },
  datasets: {
    transactions: { addresses: ['0x36b8f7473cdaa8441b4aa383dd6757c5603d8b8c', '0x235cc9e6a7b9bac03056f3eb7034c30bd80a5157'] },
    event_logs: { contracts: [sim.examples.verifiedContract], topics: [sim.examples.transferTopic] },
    token_supply: { tokens: ['0xd34198f9efc7fd39f0334e76b929f8e3059a6eed'] },
  },
});

type Listed = { window: string; fromBlock: number | null; toBlock: number | null };
const listed = (ws: readonly Listed[]): Listed[] =>
  ws.map((w) => ({ window: w.window, fromBlock: w.fromBlock, toBlock: w.toBlock })).sort((a, b) => a.window.localeCompare(b.window));

/** What `chainlake plan` prints as JSON, run by the CLI's parser in this process. */
async function planCommand(args: string[]): Promise<PlanEstimate> {
  let out = '';
  const write = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    out += String(chunk);
    return true;
  });
  try {
    const r = await runCliInProcess(['plan', ...args, '--format', 'json', '--no-probe']);
    expect(r.code, r.stderr).toBe(0);
  } finally {
    write.mockRestore();
  }
  return JSON.parse(out) as PlanEstimate;
}

describe('plan --catalog', { timeout: 300_000 }, () => {
  it('lists exactly the windows the next enqueue queues, and those a local lake with the same history plans', async () => {
    const db = await pg.database();
    const store = path.join(tmp.dir, 'store');
    const file = path.join(tmp.dir, 'job.json');
    const doc = jobDoc(path.join(tmp.dir, 'local'));
    await writeFile(file, JSON.stringify(doc));
    const job = () => parseJob(doc, file, process.env);

    // History: a first distributed run, committed, its top windows provisional.
    const first = await enqueueJob(job(), doc, { catalog: db.url, store });
    const report = await runWorker({ catalog: db.url, store, id: 'w1', untilIdle: true, pollMs: 50, leaseSeconds: 30, env: process.env });
    expect(report.windowsFailed).toBe(0);
    const client = await db.connect();
    const statuses = (await client.query(`SELECT status, count(*)::INT AS n FROM chainlake.windows WHERE run_id = $1 GROUP BY status`, [first.runId])).rows;
    expect(Object.fromEntries(statuses.map((r) => [r.status, r.n]))).toEqual({ committed: expect.any(Number), provisional: expect.any(Number) });

    // The same history on one machine: a first run of the same job into a local lake.
    expect((await runJob(job())).status).toBe('complete');

    const distributed = await planCommand([file, '--catalog', db.url]);
    expect(distributed.lake).toBe(db.url);
    expect(distributed.skipped).toBeGreaterThan(0);
    // The provisional windows and the safety margin below the last final block are fetched again.
    expect(distributed.windows.some((w) => w.provisional)).toBe(true);

    const second = await enqueueJob(job(), doc, { catalog: db.url, store });
    expect(second.resumed).toBe(false);
    expect(second.head).toBe(distributed.head);
    const queued = (await client.query(`SELECT window_id, from_block, to_block FROM chainlake.windows WHERE run_id = $1`, [second.runId])).rows.map((r) => ({
      window: String(r.window_id),
      fromBlock: r.from_block === null ? null : Number(r.from_block),
      toBlock: r.to_block === null ? null : Number(r.to_block),
    }));
    expect(listed(distributed.windows)).toEqual(listed(queued));
    expect(distributed.skipped).toBe(second.skipped);

    // The local lake with the same history: the same windows, by the same planner.
    const local = await estimatePlan(job(), { probe: false });
    expect(local.head).toBe(distributed.head);
    expect(listed(local.windows)).toEqual(listed(distributed.windows));

    // While that run is unfinished, enqueue would take it up again: the plan says so instead of listing new windows.
    let out = '';
    const write = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
      out += String(chunk);
      return true;
    });
    try {
      expect((await runCliInProcess(['plan', file, '--catalog', db.url])).code).toBe(0);
    } finally {
      write.mockRestore();
    }
    expect(out).toContain(`run ${second.runId} is not finished`);
    await client.end();
  });

  it("reads the quota left from the control plane's request_usage, per workers' account", async () => {
    const db = await pg.database();
    const client = await db.connect();
    await setupControlPlane(client, `${path.join(tmp.dir, 'quota-store')}/lake/`);
    const today = new Date().toISOString().slice(0, 10);
    // What workers of the account `main` reserved today, and of another account.
    await client.query(`INSERT INTO chainlake.request_usage (account, day, requests) VALUES ('main', $1, 250), ('other', $1, 40)`, [today]);
    await client.end();
    const file = path.join(tmp.dir, 'quota.json');
    await writeFile(file, JSON.stringify({ ...jobDoc(path.join(tmp.dir, 'quota')), dailyRequestQuota: 1_000 }));
    expect((await planCommand([file, '--catalog', db.url, '--account', 'main'])).quotaLeftToday).toBe(750);
    expect((await planCommand([file, '--catalog', db.url])).quotaLeftToday).toBe(1_000);
  });

  it('refuses the flags enqueue has not, naming them', async () => {
    const db = await pg.database();
    const file = path.join(tmp.dir, 'refused.json');
    await writeFile(file, JSON.stringify(jobDoc(path.join(tmp.dir, 'refused'))));
    const r = await runCliInProcess(['plan', file, '--catalog', db.url, '--full-refresh']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--full-refresh changes what a run fetches, and `chainlake enqueue` has no such flag/);
  });
});
