// Requests close to the minimum on a chain of realistic height: a block-ranged listing costs about
// ceil(rows / 1000) requests whatever the chain's height and the scope's density (issue 20).
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatPlan } from '../../src/cli/commands/plan.js';
import { estimatePlan } from '../../src/pipeline/estimate.js';
import { parseJob } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { SparseChain } from '../../src/simulator/sparse.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';

let sim: RunningSimulator;
let dir: string;
let cleanup: () => Promise<void>;
const tall = new SparseChain(5, 'mainnet');
beforeAll(async () => {
  sim = await startSimulator({ seed: 5, chain: 'sparse' });
  ({ dir, cleanup } = await tempDir());
});
afterAll(async () => {
  await sim?.close();
  await cleanup?.();
});

const job = (lake: string, addresses: string[], range: Record<string, unknown> = {}) =>
  parseJob(
    { name: 'tall', target: 'simulator', lake, range: { fromBlock: 0, ...range }, datasets: { erc20_transfers: { addresses } } },
    'sparse-requests-test',
    process.env,
  );

/** The requests a listing needs at least: its pages, one for an empty scope. */
const minimum = (rows: number): number => Math.max(1, Math.ceil(rows / 1000));

describe('requests on a chain of 53M blocks', () => {
  it('a sparse and an empty scope from genesis cost one request each, not one per chunk', async () => {
    const lake = path.join(dir, 'sparse');
    const { sparse, empty } = sim.sparseAddresses!;
    const report = await runJob(job(lake, [sparse, empty]), { simulator: sim });
    expect(report.status).toBe('complete');
    expect(report.head).toBe(tall.head);
    const rows = tall.count(sparse, 0, tall.head);
    expect(report.totals.rows).toBe(rows);
    // One head pin, one page per scope.
    expect(report.totals.requests).toBe(1 + 2);
    const windows = await queryCatalog(lake, 'SELECT scope, from_block, to_block, rows_expected, status FROM windows ORDER BY scope');
    expect(windows.map((w) => [w.from_block, w.to_block, w.status])).toEqual([
      [0n, BigInt(tall.head), 'committed'],
      [0n, BigInt(tall.head), 'committed'],
    ]);
    const marks = await queryCatalog(lake, 'SELECT block FROM watermarks');
    expect(marks.map((m) => m.block)).toEqual([BigInt(tall.head), BigInt(tall.head)]);
  });

  it('a dense scope costs its pages and no more than 5 % over, in windows cut where the run asks', async () => {
    const lake = path.join(dir, 'dense');
    const { dense } = sim.sparseAddresses!;
    const from = 40_000_000;
    const report = await runJob(job(lake, [dense], { fromBlock: from }), { simulator: sim, windowRows: 10_000 });
    expect(report.status).toBe('complete');
    const rows = tall.count(dense, from, tall.head);
    expect(rows).toBeGreaterThan(30_000);
    expect(report.totals.rows).toBe(rows);
    const windowRequests = report.totals.requests - 1;
    expect(windowRequests).toBeGreaterThanOrEqual(minimum(rows));
    expect(windowRequests).toBeLessThanOrEqual(Math.ceil(1.05 * minimum(rows)));
    const windows = await queryCatalog(lake, 'SELECT from_block, to_block, rows_got FROM windows ORDER BY from_block');
    expect(windows.length).toBeGreaterThanOrEqual(Math.ceil(rows / 10_000));
    // The windows tile the range exactly, each within the cap.
    expect(windows[0]!.from_block).toBe(BigInt(from));
    expect(windows.at(-1)!.to_block).toBe(BigInt(tall.head));
    for (let i = 1; i < windows.length; i++) expect(windows[i]!.from_block).toBe((windows[i - 1]!.to_block as bigint) + 1n);
    for (const w of windows) {
      expect(Number(w.rows_got)).toBeLessThanOrEqual(10_000);
      expect(Number(w.rows_got)).toBe(tall.count(dense, Number(w.from_block), Number(w.to_block)));
    }
    const [{ n, keys } = {}] = await queryCatalog(lake, 'SELECT count(*) AS n, count(DISTINCT (transaction_hash, ordinal)) AS keys FROM erc20_transfers');
    expect(Number(n)).toBe(rows);
    expect(Number(keys)).toBe(rows);
    const [{ wm } = {}] = await queryCatalog(lake, 'SELECT block AS wm FROM watermarks');
    expect(wm).toBe(BigInt(tall.head));
  });

  it("plan estimates what the run then spends, by the same rule, and warns when today's quota is short; by default a dense scope is one window paged past the result window, within the same bound", async () => {
    const lake = path.join(dir, 'planned');
    const { dense, sparse, empty } = sim.sparseAddresses!;
    const doc = {
      name: 'planned',
      target: 'simulator',
      simulator: { seed: 5, chain: 'sparse' },
      lake,
      dailyRequestQuota: 20,
      range: { fromBlock: 44_000_000 },
      datasets: { erc20_transfers: { addresses: [dense, sparse, empty] } },
    };
    const plan = await estimatePlan(parseJob(doc, 'plan-test', process.env), { probe: true });
    expect(plan.head).toBe(tall.head);
    expect(plan.windows).toHaveLength(3);
    expect(plan.quotaLeftToday).toBe(20);
    expect(formatPlan(plan)).toMatch(/warning: the plan needs \d+ requests and 20 are left today/);
    const report = await runJob(parseJob({ ...doc, dailyRequestQuota: 10_000 }, 'plan-test', process.env), { simulator: sim });
    expect(report.status).toBe('complete');
    const spent = report.totals.requests - report.outsideWindows.requests;
    expect(spent).toBeGreaterThanOrEqual(Math.floor(0.95 * plan.estimatedRequests));
    expect(spent).toBeLessThanOrEqual(Math.ceil(1.05 * plan.estimatedRequests));
    // The run's own bound, by default windows: the dense scope is one window paged past the result window, and
    // each scope costs its pages (one for the empty one) and no more than 5 % over.
    const rows = [dense, sparse, empty].map((a) => tall.count(a, 44_000_000, tall.head));
    expect(rows[0]).toBeGreaterThan(10_000);
    expect(report.totals.rows).toBe(rows[0]! + rows[1]! + rows[2]!);
    expect(report.totals.windows).toBe(3);
    expect(spent).toBeLessThanOrEqual(Math.ceil(1.05 * rows.reduce((n, r) => n + minimum(r), 0)));
  });
});
