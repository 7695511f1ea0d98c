// The daily request quota (issue 20): a run never sends more than the quota, usage is kept per UTC day in the
// catalog across runs, at the limit the run commits what it has and stops (quota_reached, exit 4), and the
// next run resumes where it stopped.
import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QuotaReachedError } from '../../src/extract/quota.js';
import { parseJob } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { SparseChain } from '../../src/simulator/sparse.js';
import { CLI, runCli } from '../helpers/cli.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';

let sim: RunningSimulator;
let dir: string;
let cleanup: () => Promise<void>;
const tall = new SparseChain(3, 'mainnet');
const FROM = 46_000_000;
beforeAll(async () => {
  sim = await startSimulator({ seed: 3, chain: 'sparse' });
  ({ dir, cleanup } = await tempDir());
});
afterAll(async () => {
  await sim?.close();
  await cleanup?.();
});

const doc = (lake: string, quota: number) => ({
  name: 'quota',
  target: 'simulator',
  simulator: { seed: 3, chain: 'sparse' },
  lake,
  concurrency: 2,
  dailyRequestQuota: quota,
  range: { fromBlock: FROM },
  datasets: { erc20_transfers: { addresses: [sim.sparseAddresses!.dense, sim.sparseAddresses!.sparse] } },
});
const day1 = new Date('2026-11-24T10:00:00Z');
const day2 = new Date('2026-11-25T00:00:05Z');

describe('the daily request quota', () => {
  it('stops at the quota, commits what it has, refuses the same day, and resumes the next day to the same lake', async () => {
    const lake = path.join(dir, 'lake');
    const rows = tall.count(sim.sparseAddresses!.dense, FROM, tall.head) + tall.count(sim.sparseAddresses!.sparse, FROM, tall.head);
    expect(rows).toBeGreaterThan(20_000);
    const QUOTA = 15;
    sim.resetStats();
    const first = await runJob(parseJob(doc(lake, QUOTA), 'quota-test', process.env), { simulator: sim, now: () => day1, windowRows: 10_000 });
    expect(first.status).toBe('quota_reached');
    // Never more than the quota: what the server saw, what the report and the catalog say.
    expect(sim.stats().requests).toBe(QUOTA);
    expect(first.totals.requests).toBe(QUOTA);
    expect(first.quota).toMatchObject({ account: 'simulator', limit: QUOTA, usedToday: QUOTA, reached: true });
    const usage = await queryCatalog(lake, `SELECT strftime(day, '%Y-%m-%d') AS day, account, sum(requests)::INT AS n FROM request_usage GROUP BY ALL`);
    expect(usage).toEqual([{ day: '2026-11-24', account: 'simulator', n: QUOTA }]);
    const runs1 = await queryCatalog(lake, 'SELECT status FROM runs');
    expect(runs1).toEqual([{ status: 'quota_reached' }]);
    const committed = await queryCatalog(lake, `SELECT count(*)::INT AS n, sum(rows_got)::INT AS r FROM windows WHERE status = 'committed'`);
    expect(committed[0]!.n).toBeGreaterThan(0);
    const kept = Number((await queryCatalog(lake, 'SELECT count(*) AS n FROM erc20_transfers'))[0]!.n);
    expect(kept).toBe(committed[0]!.r);
    expect(kept).toBeGreaterThan(0);
    expect(kept).toBeLessThan(rows);

    // The same day, even with another process: nothing is sent.
    sim.resetStats();
    await expect(
      runJob(parseJob(doc(lake, QUOTA), 'quota-test', process.env), { simulator: sim, now: () => new Date('2026-11-24T23:59:59Z'), windowRows: 10_000 }),
    ).rejects.toBeInstanceOf(QuotaReachedError);
    expect(sim.stats().requests).toBe(0);

    // The next UTC day: the run resumes the stopped one (same head, the committed windows skipped) and finishes.
    const second = await runJob(parseJob(doc(lake, 1_000), 'quota-test', process.env), { simulator: sim, now: () => day2, windowRows: 10_000 });
    expect(second.status).toBe('complete');
    expect(second.resumeOf).toBe(first.runId);
    expect(second.quota).toMatchObject({ usedToday: second.totals.requests, reached: false });
    const n = await queryCatalog(lake, 'SELECT count(*)::INT AS n, count(DISTINCT (transaction_hash, ordinal))::INT AS k FROM erc20_transfers');
    expect(n).toEqual([{ n: rows, k: rows }]);
    const byDay = await queryCatalog(lake, `SELECT strftime(day, '%Y-%m-%d') AS day, sum(requests)::INT AS n FROM request_usage GROUP BY day ORDER BY day`);
    expect(byDay).toEqual([
      { day: '2026-11-24', n: QUOTA },
      { day: '2026-11-25', n: second.totals.requests },
    ]);
    // Both runs together stay close to the minimum: what the stopped run's unfinished windows had fetched is
    // all that was spent twice.
    expect(first.totals.requests + second.totals.requests).toBeLessThanOrEqual(Math.ceil(rows / 1000) + 2 + 2 + 2 * 10);
  });

  it('the CLI exits 4 at the quota and says so', async () => {
    const lake = path.join(dir, 'cli');
    const file = path.join(dir, 'quota.json');
    await writeFile(file, JSON.stringify(doc(lake, 12)));
    const r = await runCli(['run', file]);
    expect(r.code).toBe(4);
    expect(r.stdout + r.stderr).toMatch(/quota/);
    const again = await runCli(['run', file]);
    expect(again.code).toBe(4);
    expect(again.stderr).toMatch(/daily request quota of 12 requests is spent/);
  });

  it('a run killed with SIGKILL between commits: its reserved requests count as spent, and the day never exceeds the quota', async () => {
    const lake = path.join(dir, 'killed');
    const file = path.join(dir, 'killed.json');
    const QUOTA = 60;
    // The dense scope from genesis needs more requests than the quota; no commit before the kill.
    const job = {
      name: 'killed',
      target: 'api',
      endpoints: { mainnet: sim.urls.mainnet },
      apiKey: sim.apiKey,
      lake,
      concurrency: 2,
      dailyRequestQuota: QUOTA,
      commit: { everyRows: 10_000_000, everySeconds: 3600 },
      range: { fromBlock: 0 },
      datasets: { erc20_transfers: { addresses: [sim.sparseAddresses!.dense] } },
    };
    expect(tall.count(sim.sparseAddresses!.dense, 0, tall.head)).toBeGreaterThan(QUOTA * 1000);
    await writeFile(file, JSON.stringify(job));
    sim.resetStats();
    const child = spawn(process.execPath, [CLI, 'run', file, '-q'], { stdio: 'ignore' });
    const exited = new Promise((r) => child.once('exit', r));
    // Kill it once it has spent some requests (bounded: 60 s), before it could commit anything.
    for (let i = 0; i < 6000 && sim.stats().requests < 10; i++) await new Promise((r) => setTimeout(r, 10));
    child.kill('SIGKILL');
    await exited;
    const first = sim.stats().requests;
    expect(first).toBeGreaterThanOrEqual(10);

    // The next run, the same day: recovery records the dead run's reservation, and the quota holds.
    const today = new Date();
    const second = await runJob(parseJob(job, 'killed', process.env), { simulator: sim, now: () => today });
    expect(second.status).toBe('quota_reached');
    expect(sim.stats().requests).toBeLessThanOrEqual(QUOTA);
    const dead = await queryCatalog(lake, `SELECT sum(requests)::INT AS n FROM request_usage WHERE run_id <> '${second.runId}'`);
    expect(dead[0]!.n).toBeGreaterThanOrEqual(first);
  }, 120_000);
});
