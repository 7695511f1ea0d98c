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

/**
 * Four windows of the whale paged at once over one transport; each must come out complete. Small pages
 * (`pageSize`) make requests cheap, so that the client can outrun a server limit even on a busy machine.
 */
async function pageFourWindows(t: ReturnType<typeof transport>, limit: { rps: number; burst: number }, blocks: number, pageSize = 1000): Promise<void> {
  const head = sim.head();
  const client = explorer(t, sim);
  const ranges = [0, 1, 2, 3].map((i) => ({ from: head - (i + 1) * blocks + 1, to: head - i * blocks }));
  const expected = await Promise.all(ranges.map((r) => apiCount(sim, sim.examples.whale, r)));
  sim.setRateLimit(limit);
  sim.resetStats();
  const results = await Promise.all(
    ranges.map((r) => collect(txFetcher(client, sim.examples.whale), r, pagerOptions({ prefetch: 4, pageSize }), undefined, false)),
  );
  expect(results.map((r) => r.count)).toEqual(expected);
  expect(results.map((r) => r.keys.size)).toEqual(expected);
}

describe('request rate', () => {
  it('never exceeds --rps beyond the burst in any one-second window, and draws no 429 from a server limit of the same rate', async () => {
    const at: number[] = [];
    const t = transport({ concurrency: 8, rps: 40, burst: 4, onAttempt: (e) => at.push(e.at) });
    try {
      await pageFourWindows(t, { rps: 40, burst: 40 }, 6000);
      expect(at.length).toBeGreaterThan(60);
      expect(maxInWindow(at)).toBeLessThanOrEqual(40 + 4 - 1);
      expect(sim.stats().rateLimited).toBe(0);
    } finally {
      sim.setRateLimit(undefined);
      await t.close();
    }
  });

  it('backs off when --rps is above the server limit, and completes', async () => {
    const t = transport({ concurrency: 8, rps: 200 });
    try {
      await pageFourWindows(t, { rps: 20, burst: 10 }, 300, 100);
      expect(sim.stats().rateLimited).toBeGreaterThan(0);
      expect(t.limiter.currentRate).toBeLessThan(100);
    } finally {
      sim.setRateLimit(undefined);
      await t.close();
    }
  });

  it('learns a rate from throttling when no --rps is given, and completes', async () => {
    const t = transport({ concurrency: 8 });
    try {
      await pageFourWindows(t, { rps: 20, burst: 10 }, 300, 100);
      const limited = sim.stats().rateLimited;
      expect(limited).toBeGreaterThan(0);
      expect(t.limiter.currentRate).toBeLessThan(Infinity);
      // The learned pace (and the Retry-After pauses) keep most requests under the limit.
      expect(limited).toBeLessThan(sim.stats().requests / 2);
    } finally {
      sim.setRateLimit(undefined);
      await t.close();
    }
  });
});
