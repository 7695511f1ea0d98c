import { cp } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatPlan } from '../../src/cli/commands/plan.js';
import { estimatePlan, type PlanEstimate } from '../../src/pipeline/estimate.js';
import { parseJob } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { verifySession } from '../../src/pipeline/verify/session.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';

let sim: RunningSimulator;
let tmp: Awaited<ReturnType<typeof tempDir>>;

beforeAll(async () => {
  sim = await startSimulator({ seed: 1, scale: 'small' });
  tmp = await tempDir('chainlake-plan-windows-');
});
afterAll(async () => {
  await sim?.close();
  await tmp?.cleanup();
});

interface LedgerWindow {
  window: string;
  fromBlock: number | null;
  toBlock: number | null;
  provisional: boolean;
}

const sorted = (ws: LedgerWindow[]) => [...ws].sort((a, b) => a.window.localeCompare(b.window));

const planned = (p: PlanEstimate): LedgerWindow[] =>
  sorted(p.windows.map((w) => ({ window: w.window, fromBlock: w.fromBlock, toBlock: w.toBlock, provisional: w.provisional })));

/** The windows a run recorded in its ledger. */
async function recorded(lake: string, runId: string): Promise<LedgerWindow[]> {
  const rows = await queryCatalog(lake, `SELECT window_id, from_block, to_block, status FROM windows WHERE run_id = '${runId}'`);
  return sorted(
    rows.map((r) => ({
      window: String(r.window_id),
      fromBlock: r.from_block === null ? null : Number(r.from_block),
      toBlock: r.to_block === null ? null : Number(r.to_block),
      provisional: r.status === 'provisional',
    })),
  );
}

/** Two scopes of jobs/demo.json (seed 1), in chunks, with an unfinal zone at the top. */
function jobDoc(name: string, extra: Record<string, unknown> = {}) {
  return {
    name,
    target: 'simulator',
    lake: path.join(tmp.dir, name),
    concurrency: 2,
    range: { fromBlock: 0, toBlock: 'head', windowBlocks: 4_000, finalityDepth: 500 },
    datasets: {
      transactions: { addresses: ['0x36b8f7473cdaa8441b4aa383dd6757c5603d8b8c', '0x235cc9e6a7b9bac03056f3eb7034c30bd80a5157'] },
      token_supply: { tokens: ['0xd34198f9efc7fd39f0334e76b929f8e3059a6eed'] },
    },
    ...extra,
  };
}

/**
 * The plan of `jobDoc('fresh')` on a new lake, and the first run that then builds it: made once for the file (by
 * whichever test asks first); a test that changes the lake works on a copy.
 */
let firstRun: Promise<{ doc: ReturnType<typeof jobDoc>; plan: PlanEstimate; report: Awaited<ReturnType<typeof runJob>> }> | undefined;
const fresh = () =>
  (firstRun ??= (async () => {
    const doc = jobDoc('fresh');
    const plan = await estimatePlan(parseJob(doc, 'inline', {}), { probe: false, simulator: sim });
    const report = await runJob(parseJob(doc, 'inline', {}), { simulator: sim });
    return { doc, plan, report };
  })());

describe('plan prints the windows the run then records', { timeout: 120_000 }, () => {
  it('a first run, with provisional windows above the last final block', async () => {
    const { doc, plan, report } = await fresh();
    expect(plan.finalBlock).toBe(plan.head! - 500);
    expect(plan.windows.some((w) => w.provisional)).toBe(true);
    expect(plan.windows.some((w) => w.fromBlock === null)).toBe(true);
    expect(report.status).toBe('complete');
    expect(planned(plan)).toEqual(await recorded(doc.lake, report.runId));

    // The text names each window with its range, and which are provisional.
    const text = formatPlan(plan);
    for (const w of plan.windows)
      expect(text).toMatch(
        new RegExp(
          `${w.dataset}\\s+${w.scope}\\s+${w.fromBlock === null ? 'snapshot' : `blocks ${w.fromBlock}-${w.toBlock}`}\\s+${w.provisional ? 'provisional' : ''}`,
        ),
      );
    expect(text).toContain(`blocks above ${plan.finalBlock} are not final`);
  });

  it('a resumed run: only the windows its predecessor did not commit, at that run’s head', async () => {
    // Yesterday, a run stopped at its quota after a few windows: today's run resumes it.
    const yesterday = () => new Date(Date.now() - 86_400_000);
    const stopped = await runJob(parseJob(jobDoc('resumed', { dailyRequestQuota: 4 }), 'inline', {}), { simulator: sim, now: yesterday });
    expect(stopped.status).toBe('quota_reached');
    const doc = jobDoc('resumed');
    const plan = await estimatePlan(parseJob(doc, 'inline', {}), { probe: true, simulator: sim });
    expect(plan.resumeOf).toBe(stopped.runId);
    expect(plan.head).toBe(stopped.head);
    expect(plan.skipped).toBeGreaterThan(0);
    const report = await runJob(parseJob(doc, 'inline', {}), { simulator: sim });
    expect(report.status).toBe('complete');
    expect(report.resumeOf).toBe(stopped.runId);
    expect(planned(plan)).toEqual(await recorded(doc.lake, report.runId));
  });
});

describe('plan counts the requests finality adds', { timeout: 120_000 }, () => {
  it('event_logs windows fetched again ask their block times: the estimate counts each block once, as the run asks them', async () => {
    const doc = jobDoc('block-times', {
      range: { fromBlock: 0, incremental: true, windowBlocks: 4_000, finalityDepth: 500 },
      datasets: {
        transactions: { addresses: ['0x36b8f7473cdaa8441b4aa383dd6757c5603d8b8c'] },
        event_logs: { contracts: [sim.examples.verifiedContract, '0xd34198f9efc7fd39f0334e76b929f8e3059a6eed'], topics: [sim.examples.transferTopic] },
      },
    });
    const first = await runJob(parseJob(doc, 'inline', {}), { simulator: sim });
    expect(first.status).toBe('complete');
    // The second run fetches the unfinal zone (and the safety margin) again: its event_logs windows replace by time.
    const plan = await estimatePlan(parseJob(doc, 'inline', {}), { probe: true, simulator: sim });
    const report = await runJob(parseJob(doc, 'inline', {}), { simulator: sim });
    expect(report.status).toBe('complete');
    const [asked] = await queryCatalog(doc.lake, `SELECT count(*) AS n FROM requests WHERE run_id = '${report.runId}' AND endpoint = 'block'`);
    expect(Number(asked!.n)).toBeGreaterThan(0);
    expect(plan.blockTimeRequests).toBe(Number(asked!.n));
    // Every request the run sent for its windows, block times included, was in the estimate.
    expect(plan.estimatedRequests).toBe(report.totals.requests - report.outsideWindows.requests);
    expect(formatPlan(plan)).toContain(`(${plan.blockTimeRequests} of them block times`);
  });
});

describe('plan estimates what a verify of the lake costs', { timeout: 120_000 }, () => {
  it('the requests a full verify then sends, counted at the API, by verify --plan’s count', async () => {
    // Before the lake exists there is nothing to verify.
    const empty = await estimatePlan(parseJob(jobDoc('verify-cost'), 'inline', {}), { probe: false, simulator: sim });
    expect(empty.verify).toEqual({ windows: 0, requests: 0, exportRequests: 0, notCheckable: 0 });
    expect(formatPlan(empty)).toContain('verify: the lake holds no committed window of this job yet');
    // Then the lake of the job's first run (a copy: verifying records its own run).
    const first = await fresh();
    expect(first.report.status).toBe('complete');
    const doc = { ...first.doc, lake: path.join(tmp.dir, 'verify-copy') };
    await cp(first.doc.lake, doc.lake, { recursive: true });
    const plan = await estimatePlan(parseJob(doc, 'inline', {}), { probe: true, simulator: sim });
    expect(plan.verify.windows).toBeGreaterThan(2);
    expect(plan.verify.requests).toBeGreaterThan(0);
    const before = sim.stats().requests;
    const verified = await verifySession(parseJob(doc, 'inline', {}), { kind: 'local', lake: doc.lake }, {}, { simulator: sim });
    expect(verified.holds).toBe(true);
    expect(sim.stats().requests - before).toBe(plan.verify.requests);
    expect(verified.requests).toBe(plan.verify.requests);
    expect(formatPlan(plan)).toContain(
      `verify: a full \`chainlake verify\` of the ${plan.verify.windows} committed windows would send ${plan.verify.requests} requests if every window holds`,
    );
  });
});
