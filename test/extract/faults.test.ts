import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FAULT_KINDS, startSimulator, type FaultKind, type RunningSimulator } from '../../src/simulator/index.js';
import { fetchAllPages } from '../helpers/api.js';
import { apiCount, collect, explorer, pagerOptions, transport, txFetcher } from './helpers.js';

/**
 * Every fault kind of the simulator, survived by an export of the whale's first thirty-sixth of the chain with
 * complete, duplicate-free results equal to the API's own rows. The simulator's result window is cut to
 * `WINDOW` rows so that the pager moves its window along several times without many rows to serve, and pages
 * are small so that each fault kind is met often.
 */
const WINDOW = 1_000;
const PAGE = 100;

let sim: RunningSimulator;
let reference: Set<string>;
let range: { from: number; to: number };

beforeAll(async () => {
  sim = await startSimulator({ seed: 21, resultWindow: WINDOW });
  range = { from: 0, to: Math.floor(sim.head() / 36) };
  // The reference, read independently: plain offset paging on a simulator of the same chain without the cap.
  const open = await startSimulator({ seed: 21, resultWindow: 1_000_000 });
  try {
    const rows = await fetchAllPages(`${open.urls.mainnet}/v1/accounts/${open.examples.whale}/transactions`, open.apiKey, { endBlock: range.to });
    reference = new Set(rows.map((r) => String(r.transaction_hash).toLowerCase()));
  } finally {
    await open.close();
  }
  expect(reference.size).toBe(await apiCount(sim, sim.examples.whale, range));
  // Past the result window several times over: the pager has to move its window along.
  expect(reference.size).toBeGreaterThan(2.5 * WINDOW);
});

afterAll(async () => {
  await sim?.close();
});

async function exportUnder(kinds: FaultKind[], rate: number, seed: number): Promise<void> {
  // `stall` holds the connection for a minute: the header timeout (300 ms) must cut it. Random 429s and
  // throttle envelopes slow the AIMD limiter down; with a configured ceiling it climbs back fast enough.
  const t = transport({ concurrency: 8, rps: 300, burst: 30, timeouts: { headersMs: 300, bodyMs: 5_000, totalMs: 10_000 } });
  sim.setFaults({ rate, kinds, seed, retryAfterSeconds: 0, stallMs: 60_000 });
  sim.resetStats();
  try {
    const r = await collect(
      txFetcher(explorer(t, sim), sim.examples.whale),
      range,
      pagerOptions({ prefetch: 8, pageSize: PAGE, resultWindow: WINDOW }),
      undefined,
      false,
    );
    const injected = Object.values(sim.stats().faults).reduce((a, b) => a + b, 0);
    expect(injected).toBeGreaterThan(5);
    expect(r.count).toBe(reference.size);
    expect(r.keys.size).toBe(reference.size);
    expect([...r.keys].every((k) => reference.has(k))).toBe(true);
    expect(r.acct.retries).toBeGreaterThanOrEqual(injected - 1);
  } finally {
    sim.setFaults(undefined);
    await t.close();
  }
}

describe('exports survive every fault kind', () => {
  // Rates high enough that each kind is met more than five times in the export's few dozen requests; a stall costs a
  // header timeout (undici checks it on a ~0.5 s tick), so stalls come at a lower rate.
  it.each(FAULT_KINDS.map((k, i) => [k, i] as const))('%s', (kind, i) => exportUnder([kind], kind === 'stall' ? 0.2 : 0.35, 100 + i));
  it('all kinds mixed, at a 30 % fault rate', () => exportUnder([...FAULT_KINDS], 0.3, 7));
});
