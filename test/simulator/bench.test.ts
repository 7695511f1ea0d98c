import { describe, expect, it } from 'vitest';
import { benchSimulator } from '../../src/simulator/bench.js';
import { startSimulator } from '../../src/simulator/index.js';

describe('benchSimulator', () => {
  it('pages the whale in 1000-row pages and reports its counts (no speed assertion here: see npm run bench)', async () => {
    const sim = await startSimulator();
    try {
      const r = await benchSimulator({ sim, seconds: 0.3, concurrency: 2 });
      expect(r.requests).toBeGreaterThan(0);
      expect(r.rows).toBe(r.requests * 1000);
      expect(r.rowsPerSecond).toBeGreaterThan(0);
      expect(r.cpuSeconds).toBeGreaterThan(0);
      expect(sim.stats().rowsServed).toBe(r.rows + 1); // + the blocks/latest lookup
    } finally {
      await sim.close();
    }
  });

  it('without parsing, counts the rows of every page and checks them against the envelope', async () => {
    const sim = await startSimulator();
    try {
      const r = await benchSimulator({ sim, seconds: 0.3, concurrency: 2, parse: false });
      expect(r.requests).toBeGreaterThan(0);
      expect(r.rows).toBe(r.requests * 1000);
      expect(sim.stats().rowsServed).toBe(r.rows + 1);
    } finally {
      await sim.close();
    }
  });
});
