// `chainlake verify` on a distributed lake (PostgreSQL control plane + store): the same module reads its windows
// and rows through the distributed reader, asks the API, and records its findings in the control plane's
// `chainlake.verifications` and its requests in `chainlake.request_usage`. --repair is refused there, clearly.
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { enqueueJob } from '../../src/distributed/enqueue.js';
import { runWorker } from '../../src/distributed/worker.js';
import { parseJob } from '../../src/pipeline/job.js';
import { verifySession } from '../../src/pipeline/verify/session.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { startPostgres, type TestPostgres } from '../ducklake/postgres.js';
import { tempDir } from '../helpers/lake.js';

const A = '0x36b8f7473cdaa8441b4aa383dd6757c5603d8b8c';
let pg: TestPostgres;
let sim: RunningSimulator;
let tmp: Awaited<ReturnType<typeof tempDir>>;

beforeAll(async () => {
  pg = await startPostgres();
  process.env.PGPASSWORD = pg.password;
  sim = await startSimulator({ seed: 1, scale: 'small' });
  tmp = await tempDir('chainlake-verify-distributed-');
}, 120_000);
afterAll(async () => {
  await sim?.close();
  await pg?.stop();
  await tmp?.cleanup();
});

it('a distributed lake verifies: every window held, findings and requests in the control plane; --repair refused', async () => {
  const db = await pg.database();
  const store = path.join(tmp.dir, 'store');
  const doc = {
    name: 'dist-verify',
    network: 'mainnet',
    target: 'simulator',
    simulator: { seed: 1, scale: 'small' },
    range: { fromBlock: 0, toBlock: 'head', windowBlocks: 12000 },
    datasets: { transactions: { addresses: [A] } },
  };
  const job = parseJob(doc, 'dist-verify');
  await enqueueJob(job, doc, { catalog: db.url, store, simulator: sim });
  await runWorker({ catalog: db.url, store, id: 'w', untilIdle: true, pollMs: 50, simulator: sim });

  const target = { kind: 'distributed', catalog: db.url, store } as const;
  const s = await verifySession(job, target, {}, { simulator: sim });
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
    const usage = (await c.query(`SELECT requests::int AS requests FROM chainlake.request_usage WHERE account = 'simulator'`)).rows;
    expect(usage[0]!.requests).toBeGreaterThanOrEqual(1);
  } finally {
    await c.end();
  }
  await expect(verifySession(job, target, {}, { simulator: sim, repair: true })).rejects.toMatchObject({
    code: 'CHAINLAKE_USAGE',
    message: expect.stringMatching(/--repair works on a local lake only/),
  });
}, 300_000);
