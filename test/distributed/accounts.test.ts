// Accounts in the distributed mode (issue 22): workers of one account take turns (a lease), workers of two
// accounts fetch side by side, and the account's daily request quota is kept across workers in PostgreSQL.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enqueueJob } from '../../src/distributed/enqueue.js';
import { SharedQuota } from '../../src/distributed/account.js';
import { setupControlPlane } from '../../src/distributed/control-plane.js';
import { openDistributedLake } from '../../src/distributed/read.js';
import { runWorker } from '../../src/distributed/worker.js';
import { parseJob } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { startPostgres, type TestPostgres } from '../ducklake/postgres.js';
import { tempDir } from '../helpers/lake.js';
import { distributedRows, singleMachineRows } from './helpers.js';

let pg: TestPostgres;
let sim: RunningSimulator;
let tmp: Awaited<ReturnType<typeof tempDir>>;

beforeAll(async () => {
  pg = await startPostgres();
  sim = await startSimulator({ seed: 3, chain: 'sparse' });
  tmp = await tempDir('chainlake-accounts-');
}, 120_000);

afterAll(async () => {
  await sim?.close();
  await pg?.stop();
  await tmp?.cleanup();
});

const FROM = 46_000_000;

const quotaJob = (quota: number) => ({
  name: 'accounts-quota',
  target: 'simulator',
  simulator: { seed: 3, chain: 'sparse' },
  concurrency: 2,
  dailyRequestQuota: quota,
  range: { fromBlock: FROM, windowBlocks: 500_000 },
  datasets: { erc20_transfers: { addresses: [sim.sparseAddresses!.dense, sim.sparseAddresses!.sparse] } },
});

describe('accounts', () => {
  it('a shared quota never refuses a request while the day has room, and grants exactly the quota to requests in flight at once', async () => {
    const db = await pg.database();
    const setup = await db.connect();
    await setupControlPlane(setup, '/nowhere/lake/');
    const ask = (quota: SharedQuota, n: number) => Promise.all(Array.from({ length: n }, () => quota.ready().then(() => quota.take())));
    const day = () => new Date(Date.UTC(2026, 10, 1, 12));
    const roomy = new SharedQuota(await db.connect(), 'roomy', 1_000, day);
    expect((await ask(roomy, 300)).filter((ok) => !ok)).toEqual([]);
    expect(roomy.reachedToday()).toBe(false);
    const tight = new SharedQuota(await db.connect(), 'tight', 70, day);
    expect((await ask(tight, 200)).filter((ok) => ok).length).toBe(70);
    expect(tight.reachedToday()).toBe(true);
    const used = (await setup.query(`SELECT account, requests::INT AS n FROM chainlake.request_usage ORDER BY account`)).rows;
    expect(used).toEqual([
      { account: 'roomy', n: 300 },
      { account: 'tight', n: 70 },
    ]);

    // Two runs of one account in one worker share its quota connection: their top-ups must not interleave
    // (each is a transaction of its own), or both would be granted from the same count.
    const shared = await db.connect();
    const [a, b] = [new SharedQuota(shared, 'two-runs', 70, day), new SharedQuota(shared, 'two-runs', 70, day)];
    const sent = (await Promise.all([ask(a, 100), ask(b, 100)])).flat().filter((ok) => ok).length;
    expect(sent).toBe(70);
    expect((await setup.query(`SELECT requests::INT AS n FROM chainlake.request_usage WHERE account = 'two-runs'`)).rows).toEqual([{ n: 70 }]);
  }, 60_000);

  it('workers of one account take turns; workers of two accounts fetch side by side', async () => {
    // The sparser first 3,000,000 blocks of the quota job: windows enough for two workers to each take some, fewer
    // windows and rows than the whole job (the turns are the point, not the size).
    const base = quotaJob(1_000_000);
    const doc = { ...base, name: 'accounts-turns', range: { ...base.range, toBlock: FROM + 3_000_000 } };
    for (const [accounts, fetchers] of [
      [['one', 'one'], 1],
      [['one', 'two'], 2],
    ] as const) {
      const db = await pg.database();
      const store = path.join(tmp.dir, `turns-${fetchers}`);
      await enqueueJob(parseJob(doc, 'turns', process.env), doc, { catalog: db.url, store, simulator: sim });
      await Promise.all(
        accounts.map((account, i) =>
          runWorker({ catalog: db.url, store, id: `w${i}`, account, untilIdle: true, pollMs: 50, leaseSeconds: 60, commitRows: 1_000_000, simulator: sim }),
        ),
      );
      const client = await db.connect();
      const by = (await client.query(`SELECT worker, count(*)::INT AS n FROM chainlake.windows WHERE status = 'committed' GROUP BY worker`)).rows;
      expect(by.length, JSON.stringify(by)).toBe(fetchers);
      expect(by.reduce((n, r) => n + Number(r.n), 0)).toBeGreaterThan(fetchers);
    }
  }, 240_000);

  it("an account's daily quota holds across workers and days: each UTC day the API sees at most the quota, and the lake ends complete", async () => {
    const QUOTA = 20;
    // The first 4,000,000 blocks: 18 windows, about 15,000 rows, two days' quota (the whole range took three days of
    // three workers each, and the days are the point, not their number).
    const doc = { ...quotaJob(QUOTA), range: { fromBlock: FROM, toBlock: FROM + 4_000_000, windowBlocks: 500_000 } };
    const job = parseJob(doc, 'quota', process.env);
    const db = await pg.database();
    const store = path.join(tmp.dir, 'quota');
    const queued = await enqueueJob(job, doc, { catalog: db.url, store, simulator: sim });
    expect(queued.queued).toBeGreaterThan(5);
    const client = await db.connect();
    const perDay: number[] = [];
    for (let day = 0; day < 8; day++) {
      // Days before the real clock's: pg-boss starts a window queued for the next day by its own clock.
      const now = () => new Date(Date.UTC(2026, 10, 10 + day, 10));
      sim.resetStats();
      // Two workers of one account, and a third of the same account joining: all stop once the day's quota is spent.
      await Promise.all(
        ['a', 'b', 'c'].map((id) =>
          runWorker({ catalog: db.url, store, id: `${id}${day}`, account: 'acct', untilIdle: true, pollMs: 50, leaseSeconds: 60, now, simulator: sim }),
        ),
      );
      perDay.push(sim.stats().requests);
      expect(sim.stats().requests).toBeLessThanOrEqual(QUOTA);
      if (day === 0) {
        // New workers the same day (another machine, a restart) find the day spent in PostgreSQL: nothing is sent.
        expect(perDay[0]).toBe(QUOTA);
        sim.resetStats();
        const late = await runWorker({
          catalog: db.url,
          store,
          id: 'late',
          account: 'acct',
          untilIdle: true,
          pollMs: 50,
          leaseSeconds: 60,
          now,
          simulator: sim,
        });
        expect(sim.stats().requests).toBe(0);
        // What `worker --until-idle` exits 4 for, as a single-machine run stopped by its quota.
        expect(late).toMatchObject({ status: 'quota_reached', windowsFailedForGood: 0 });
      }
      const open = (await client.query(`SELECT count(*)::INT AS n FROM chainlake.runs WHERE finished_at IS NULL`)).rows[0].n;
      if (open === 0) break;
    }
    // The job needed more than one day's quota, and finished.
    expect(perDay.length).toBeGreaterThan(1);
    const status = (await client.query(`SELECT status FROM chainlake.runs`)).rows.map((r) => r.status);
    const failed = (await client.query(`SELECT window_id, error, attempts FROM chainlake.windows WHERE status <> 'committed'`)).rows;
    expect({ status, failed }).toEqual({ status: ['complete'], failed: [] });
    const usage = (await client.query(`SELECT CAST(day AS TEXT) AS day, requests::INT AS n FROM chainlake.request_usage WHERE account = 'acct' ORDER BY day`))
      .rows;
    expect(usage.length).toBe(perDay.length);
    for (const u of usage) expect(u.n).toBeLessThanOrEqual(QUOTA);

    // Row for row what one machine exports with no quota.
    const lake = path.join(tmp.dir, 'quota-single');
    await runJob({ ...job, source: { ...job.source, dailyRequestQuota: undefined }, lake: { ...job.lake, dir: lake } }, { simulator: sim });
    const want = (await singleMachineRows(lake)).get('erc20_transfers')!;
    expect(want.rows).toBeGreaterThan(1_000);
    const dist = await openDistributedLake({ catalog: db.url });
    try {
      expect(await distributedRows(dist.conn, 'erc20_transfers', want.columns)).toEqual({ rows: want.rows, digest: want.digest });
    } finally {
      dist.close();
    }
  }, 300_000);
});
