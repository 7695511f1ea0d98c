// The distributed mode's failures (issue 34): a failed window never wedges a job, a worker's exit code says what
// happened to the windows it took, the runs' status words are the single machine's, and a job key the workers do
// not carry out is refused by enqueue instead of being ignored.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enqueueJob } from '../../src/distributed/enqueue.js';
import { setupControlPlane } from '../../src/distributed/control-plane.js';
import { ChainlakeError } from '../../src/errors.js';
import { loadJobDocument } from '../../src/pipeline/job.js';
import { startPostgres, type TestPostgres } from '../ducklake/postgres.js';
import { tempDir } from '../helpers/lake.js';

let pg: TestPostgres;
let tmp: Awaited<ReturnType<typeof tempDir>>;

beforeAll(async () => {
  pg = await startPostgres();
  process.env.PGPASSWORD = pg.password;
  tmp = await tempDir('chainlake-failures-');
}, 120_000);

afterAll(async () => {
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
