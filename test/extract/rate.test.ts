import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { apiCount, collect, explorer, maxInWindow, pagerOptions, transport, txFetcher } from './helpers.js';

/**
 * The run-wide rate bound on the wire, against the simulator's own per-key rate limit: one token bucket
 * shared by several windows paging at once.
 */

let sim: RunningSimulator;
beforeAll(async () => {
  sim = await startSimulator({ seed: 9 });
});
afterAll(async () => {
  await sim?.close();
});

/** Four windows of the whale paged at once over one transport; each must come out complete. */
async function pageFourWindows(t: ReturnType<typeof transport>): Promise<void> {
  const head = sim.head();
  const client = explorer(t, sim);
  const ranges = [0, 1, 2, 3].map((i) => ({ from: head - (i + 1) * 6000 + 1, to: head - i * 6000 }));
  const results = await Promise.all(ranges.map((r) => collect(txFetcher(client, sim.examples.whale), r, pagerOptions({ prefetch: 4 }), undefined, false)));
  for (let i = 0; i < ranges.length; i++) expect(results[i]!.count).toBe(await apiCount(sim, sim.examples.whale, ranges[i]));
}

describe('request rate', () => {
  it('never exceeds --rps beyond the burst in any one-second window, and draws no 429 from a server limit of the same rate', async () => {
    const at: number[] = [];
    sim.setRateLimit({ rps: 40, burst: 40 });
    sim.resetStats();
    const t = transport({ concurrency: 8, rps: 40, burst: 4, onAttempt: (e) => at.push(e.at) });
    try {
      await pageFourWindows(t);
      expect(at.length).toBeGreaterThan(60);
      expect(maxInWindow(at)).toBeLessThanOrEqual(40 + 4 - 1);
      expect(sim.stats().rateLimited).toBe(0);
    } finally {
      sim.setRateLimit(undefined);
      await t.close();
    }
  });

  it('backs off when --rps is above the server limit, and completes', async () => {
    sim.setRateLimit({ rps: 25, burst: 10 });
    sim.resetStats();
    const t = transport({ concurrency: 8, rps: 100 });
    try {
      await pageFourWindows(t);
      expect(sim.stats().rateLimited).toBeGreaterThan(0);
      expect(t.limiter.currentRate).toBeLessThan(100);
    } finally {
      sim.setRateLimit(undefined);
      await t.close();
    }
  });

  it('learns a rate from throttling when no --rps is given, and completes', async () => {
    sim.setRateLimit({ rps: 25, burst: 10 });
    sim.resetStats();
    const t = transport({ concurrency: 8 });
    try {
      await pageFourWindows(t);
      const limited = sim.stats().rateLimited;
      expect(limited).toBeGreaterThan(0);
      expect(t.limiter.currentRate).toBeLessThan(Infinity);
      // The learned pace keeps most requests under the limit.
      expect(limited).toBeLessThan(sim.stats().requests / 4);
    } finally {
      sim.setRateLimit(undefined);
      await t.close();
    }
  });
});
