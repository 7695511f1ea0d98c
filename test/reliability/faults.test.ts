import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runJob } from '../../src/pipeline/run.js';
import type { RunReport } from '../../src/pipeline/report.js';
import { FAULT_KINDS, startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';
import { describePrint, fingerprint, type LakePrint } from './fingerprint.js';
import { demoJob, faultTotal, SOAK, simTarget } from './helpers.js';
import { startProxy } from './proxy.js';

/**
 * The demo job (every dataset of both APIs) against a simulator that faults at least a fifth of all
 * requests, with every fault kind, yields exactly the lake of a run without faults.
 */
let sim: RunningSimulator;
let dir: string;
let cleanup: () => Promise<void>;
let clean: LakePrint;
let cleanReport: RunReport;

// Snapshot datasets are partitioned by the run's UTC date: both runs live on the same (fixed) day, with
// real elapsed time, so a test that straddles midnight still compares like with like.
const DAY = Date.parse('2026-01-15T12:00:00Z');
const clock = () => {
  const t0 = Date.now();
  return () => new Date(DAY + Date.now() - t0);
};

beforeAll(async () => {
  sim = await startSimulator({ seed: 1, scale: 'small' });
  ({ dir, cleanup } = await tempDir('chainlake-faults-'));
  sim.resetStats();
  const report = await runJob(await demoJob(path.join(dir, 'clean')), { simulator: simTarget(sim), now: clock() });
  expect(report.status).toBe('complete');
  // The report accounts for every request the server saw: the windows' and the head pin's (one, no retry).
  expect(report.totals.requests).toBe(sim.stats().requests);
  expect(report.outsideWindows).toEqual({ requests: 1, retries: 0, throttles: 0 });
  // A clean run has no failed attempt: the API's answers that a contract is not verified (HTTP 404) are the
  // declared answer, read as rows with verified = false and counted apart.
  expect(report.failures).toEqual({});
  expect(report.notVerified).toBeGreaterThan(0);
  cleanReport = report;
  clean = await fingerprint(path.join(dir, 'clean'));
  expect(Object.keys(clean).length).toBeGreaterThanOrEqual(19);
}, 120_000);

afterAll(async () => {
  await sim?.close();
  await cleanup?.();
});

describe('faults', () => {
  const rate = SOAK ? 0.45 : 0.3;
  // Seed 5 puts every kind among the first requests of the run (the plan is fixed per arrival index); the
  // soak adds more fault plans at a higher rate.
  const seeds = SOAK ? [5, 11, 23, 42] : [5];
  it.each(seeds)(
    `the demo job with ${rate * 100} % of requests faulted (every kind, fault seed %i) equals a clean run`,
    async (seed) => {
      const lake = path.join(dir, `faulted-${seed}`);
      // Retry-After 0: each 429/503 pauses the whole run for its Retry-After (the limiter), 1 s of idle wait
      // per fault at 1; honouring a non-zero Retry-After is extract/transport.test.ts's to guard, not this test's.
      sim.setFaults({ rate, kinds: [...FAULT_KINDS], seed, retryAfterSeconds: 0, stallMs: 5_000 });
      sim.resetStats();
      const t0 = Date.now();
      let report;
      try {
        // A ceiling far above what this job reaches: each 429 and throttle envelope still backs the limiter off,
        // but it climbs back by a tenth of the ceiling per second. Without one it paces at the rate it learns
        // from the first throttles (the loaded machine's own slow sending), and the run waited idle for most of
        // its wall time (65.6 s against 19.8 s here). Learning a rate is extract/rate-limiter.test.ts's to guard.
        report = await runJob(await demoJob(lake, (doc) => (doc.rps = 1_000)), {
          simulator: simTarget(sim),
          now: clock(),
          // A stall is cut by the header timeout (undici checks it on a ~0.5 s tick); retries are quick and
          // many, so a request faulted several times in a row still gets through.
          transport: {
            timeouts: { connectMs: 2_000, headersMs: 500, bodyMs: 2_000, totalMs: 15_000 },
            retry: { maxAttempts: 15, baseDelayMs: 50, maxDelayMs: 1_000 },
          },
        });
      } finally {
        sim.setFaults(undefined);
      }
      const seconds = (Date.now() - t0) / 1000;
      const stats = sim.stats();
      const faults = faultTotal(stats.faults);
      expect(report.errors).toEqual([]);
      expect(report.status).toBe('complete');
      if (seed === 5) for (const k of FAULT_KINDS) expect(stats.faults[k] ?? 0, `fault kind ${k}`).toBeGreaterThan(0);
      expect(faults / stats.requests).toBeGreaterThanOrEqual(0.2);

      // Accounting, exactly. The report counts every request the server saw: the windows' (pages abandoned by
      // a refetch included) and the head pin's, one call plus a retry per fault it drew.
      expect(report.totals.requests, 'requests: report vs server').toBe(stats.requests);
      const sum = (k: 'requests' | 'retries' | 'throttles') => report.datasets.reduce((a, d) => a + d[k], 0) + report.outsideWindows[k];
      expect([report.totals.requests, report.totals.retries, report.totals.throttles]).toEqual([sum('requests'), sum('retries'), sum('throttles')]);
      expect(report.outsideWindows.requests).toBe(1 + report.outsideWindows.retries);
      // Each failed attempt under the reason its fault kind maps to. Connection-level faults (reset, stall) both
      // end the attempt early: a stall is cut by the header timeout (network only if the server's 5 s ran out
      // first). The one legitimate surplus: a response that is merely slower than the 0.5 s header timeout is
      // cut and retried without a fault (the machine's load decides how often).
      const f = report.failures;
      const kind = (...ks: string[]) => ks.reduce((a, k) => a + (stats.faults[k] ?? 0), 0);
      expect(f['http-429'] ?? 0, 'http-429 = 429 faults').toBe(kind('429'));
      expect(f.throttle ?? 0, 'throttle = throttle envelopes').toBe(kind('throttle'));
      expect(f['http-5xx'] ?? 0, 'http-5xx = 500, 502, 503 faults').toBe(kind('500', '502', '503'));
      expect(f['bad-body'] ?? 0, 'bad-body = truncated and HTML bodies').toBe(kind('truncated', 'non-json'));
      const slow = (f.network ?? 0) + (f.timeout ?? 0) - kind('reset', 'stall');
      expect(slow, 'network + timeout - (reset + stall faults)').toBeGreaterThanOrEqual(0);
      expect(f.network ?? 0, 'network >= resets').toBeGreaterThanOrEqual(kind('reset'));
      // No terminal failure (a fault is never read as an answer), and the "not verified" answers are the clean run's.
      expect(f['http-4xx'] ?? 0, 'no http-4xx failure').toBe(0);
      expect(report.notVerified, '"not verified" answers = the clean run\'s').toBe(cleanReport.notVerified);
      expect(Object.keys(f).filter((k) => !['http-429', 'throttle', 'http-5xx', 'bad-body', 'network', 'timeout', 'http-4xx'].includes(k))).toEqual([]);
      // Hence: every fault cost exactly one retry, plus one per slow response cut; no call gave up.
      expect(report.totals.retries, 'retries = faults + slow responses cut').toBe(faults + slow);
      expect(report.totals.throttles).toBe(kind('429', 'throttle'));

      const faulted = await fingerprint(lake);
      expect(faulted).toEqual(clean);
      const [w] = await queryCatalog(lake, `SELECT count(*) FILTER (WHERE status <> 'committed')::INT AS bad, count(*)::INT AS n FROM windows`);
      expect(w).toEqual({ bad: 0, n: report.totals.windows });
      console.log(
        `reliability/faults (seed ${seed}): survived ${faults} faults in ${stats.requests} requests (${((100 * faults) / stats.requests).toFixed(1)} %): ` +
          `${FAULT_KINDS.map((k) => `${k} ${stats.faults[k] ?? 0}`).join(', ')}; ${report.totals.retries} retries ` +
          `(${report.outsideWindows.retries} by the head pin, ${slow} for slow responses cut), report requests = server requests; ` +
          `${seconds.toFixed(1)} s; lake identical to the clean run (${describePrint(clean)})`,
      );
    },
    SOAK ? 600_000 : 180_000,
  );
});

describe('a fault on an answer', () => {
  // The API answers an unverified contract with HTTP 404 and a message; the endpoint reads that as a row
  // (verified = false, the message kept). A fault that cuts such a body short must be retried, not read as
  // the answer: before, the cut body matched "not verified", no retry was counted (the 86-vs-87 of issue #9's
  // soak run, whenever the fault plan's `truncated` fell on that request) and api_message held a JSON
  // fragment instead of the API's message.
  it('a truncated 404 body is retried, and the row equals the clean one', async () => {
    // The first 404 of each path (the ABI and the code record of the unverified contract) is cut in half.
    const cut = new Set<string>();
    const proxy = await startProxy(sim, (url, status, body) => {
      if (status !== 404 || !url.pathname.includes('/contracts/') || cut.has(url.pathname)) return undefined;
      cut.add(url.pathname);
      return { status, body: body.slice(0, Math.floor(body.length / 2)), contentType: 'application/json; charset=utf-8' };
    });
    const lake = path.join(dir, 'cut-404');
    try {
      sim.resetStats();
      const only = (doc: Record<string, unknown>) => {
        doc.datasets = { contracts: (doc.datasets as Record<string, unknown>).contracts };
      };
      const report = await runJob(await demoJob(lake, only), {
        simulator: { urls: proxy.urls, apiKey: sim.apiKey },
        now: clock(),
        transport: { retry: { maxAttempts: 3, baseDelayMs: 20, maxDelayMs: 50 } },
      });
      expect(cut.size).toBe(2);
      expect(report.errors).toEqual([]);
      expect(report.failures).toEqual({ 'bad-body': 2 });
      expect(report.notVerified).toBe(cleanReport.notVerified);
      expect(report.totals.retries).toBe(2);
      expect(report.totals.requests).toBe(sim.stats().requests);
      const print = await fingerprint(lake, { only: ['contracts'] });
      expect(print.contracts).toEqual(clean.contracts);
    } finally {
      await proxy.close();
    }
  });
});
