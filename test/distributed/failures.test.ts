// The distributed mode's failures (issue 34): a failed window never wedges a job, a worker's exit code says what
// happened to the windows it took, the runs' status words are the single machine's, and a job key the workers do
// not carry out is refused by enqueue instead of being ignored.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enqueueJob } from '../../src/distributed/enqueue.js';
import { setupControlPlane } from '../../src/distributed/control-plane.js';
import { ChainlakeError } from '../../src/errors.js';
import { runWorker } from '../../src/distributed/worker.js';
import { loadJobDocument, parseJob } from '../../src/pipeline/job.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { startPostgres, type TestPostgres } from '../ducklake/postgres.js';
import { tempDir } from '../helpers/lake.js';

let pg: TestPostgres;
let tmp: Awaited<ReturnType<typeof tempDir>>;
let sim: RunningSimulator;

const ADDRESSES = ['0x36b8f7473cdaa8441b4aa383dd6757c5603d8b8c', '0x235cc9e6a7b9bac03056f3eb7034c30bd80a5157'];
/** A small job: one window per address (no block windows of its own: the whole range at once). */
const smallJob = (name: string) => ({
  name,
  target: 'simulator',
  range: { fromBlock: 0, toBlock: 'head' },
  concurrency: 4,
  datasets: { transactions: { addresses: ADDRESSES } },
});

beforeAll(async () => {
  pg = await startPostgres();
  process.env.PGPASSWORD = pg.password;
  tmp = await tempDir('chainlake-failures-');
  sim = await startSimulator({ seed: 1, scale: 'small' });
}, 120_000);

afterAll(async () => {
  await sim?.close();
  await pg?.stop();
  await tmp?.cleanup();
});

describe('enqueue refuses what the workers would not do', () => {
  it('a job with a "decode" key is refused (exit 2) naming the key and the fix, and nothing is planned', async () => {
    const { job, doc } = await loadJobDocument(path.resolve('jobs/token-holders.json'));
    const db = await pg.database();
    const store = path.join(tmp.dir, 'store-decode');
    const client = await db.connect();
    await setupControlPlane(client, `${store}/lake/`);
    const refused = await enqueueJob(job, doc, { catalog: db.url, store }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(ChainlakeError);
    const e = refused as ChainlakeError;
    expect(e.exitCode).toBe(2);
    expect(e.message).toContain('"decode"');
    expect(e.message).toContain(path.resolve('jobs/token-holders.json'));
    expect(e.hint).toMatch(/chainlake run/);
    expect(e.hint).toMatch(/remove "decode"/);
    expect((await client.query(`SELECT count(*)::INT AS n FROM chainlake.runs`)).rows[0].n).toBe(0);
  }, 60_000);
});

describe("runs' status words", () => {
  it("a run ends `complete`, the single machine's word, and a control plane's `completed` rows are renamed by the setup", async () => {
    const db = await pg.database();
    const store = path.join(tmp.dir, 'store-words');
    const client = await db.connect();
    await setupControlPlane(client, `${store}/lake/`);
    // A run an earlier chainlake closed.
    await client.query(
      `INSERT INTO chainlake.runs (run_id, job_name, network, job_doc, job_file, range_from, ingested_at, finished_at, status)
       VALUES ('old-run', 'old', 'mainnet', '{}', 'old.json', 0, '2026-11-01T00:00:00.000Z', NOW(), 'completed')`,
    );
    const doc = smallJob('words');
    const queued = await enqueueJob(parseJob(doc, 'words.json'), doc, { catalog: db.url, store, simulator: sim });
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
