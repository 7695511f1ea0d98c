import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runJob } from '../../src/pipeline/run.js';
import { FAULT_KINDS, startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';
import { describePrint, fingerprint, type LakePrint } from './fingerprint.js';
import { demoJob, faultTotal, SOAK, simTarget } from './helpers.js';

/**
 * The demo job (every dataset of both APIs) against a simulator that faults at least a fifth of all
 * requests, with every fault kind, yields exactly the lake of a run without faults.
 */
let sim: RunningSimulator;
let dir: string;
let cleanup: () => Promise<void>;
let clean: LakePrint;

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
  const report = await runJob(await demoJob(path.join(dir, 'clean')), { simulator: simTarget(sim), now: clock() });
  expect(report.status).toBe('complete');
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
      sim.setFaults({ rate, kinds: [...FAULT_KINDS], seed, retryAfterSeconds: 1, stallMs: 5_000 });
      sim.resetStats();
      const t0 = Date.now();
      let report;
      try {
        report = await runJob(await demoJob(lake), {
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
      // Every fault cost a retry. The report counts the windows' requests; the head pin's (and its retries)
      // are the few the server saw beyond those.
      const outsideWindows = stats.requests - report.totals.requests;
      expect(outsideWindows).toBeGreaterThanOrEqual(1);
      expect(outsideWindows).toBeLessThanOrEqual(16);
      expect(report.totals.retries).toBeGreaterThanOrEqual(faults - (outsideWindows - 1));

      const faulted = await fingerprint(lake);
      expect(faulted).toEqual(clean);
      const [w] = await queryCatalog(lake, `SELECT count(*) FILTER (WHERE status <> 'committed')::INT AS bad, count(*)::INT AS n FROM windows`);
      expect(w).toEqual({ bad: 0, n: report.totals.windows });
      console.log(
        `reliability/faults (seed ${seed}): survived ${faults} faults in ${stats.requests} requests (${((100 * faults) / stats.requests).toFixed(1)} %): ` +
          `${FAULT_KINDS.map((k) => `${k} ${stats.faults[k] ?? 0}`).join(', ')}; ${report.totals.retries} retries; ` +
          `${seconds.toFixed(1)} s; lake identical to the clean run (${describePrint(clean)})`,
      );
    },
    SOAK ? 600_000 : 180_000,
  );
});
