import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { event_logs } from '../../src/datasets/event_logs.js';
import { explorerPageFetcher } from '../../src/extract/endpoint.js';
import { WindowError } from '../../src/extract/errors.js';
import { startSimulator, type RunningSimulator, type Scale } from '../../src/simulator/index.js';
import { apiCount, collect, distinct, explorer, minRequests, pagerOptions, transport, txFetcher } from './helpers.js';

/**
 * Windows and paging against the simulator: complete exports of the whale through the result-window cap,
 * the crowded block, a moving head, and the request count against the minimum.
 * `CHAINLAKE_TEST_LARGE=1` adds the whale at `medium` and `large`: the same paging and splitting as at `small`
 * (where splits and the request count are already asserted) over more rows, so the inner loop runs `small` only.
 */

async function exportWhale(scale: Scale): Promise<void> {
  const sim = await startSimulator({ scale, seed: 3 });
  const t = transport({ concurrency: 8 });
  try {
    const whale = sim.examples.whale;
    const range = { from: 0, to: sim.head() };
    const count = await apiCount(sim, whale, range);
    let outside = 0;
    const r = await collect(
      txFetcher(explorer(t, sim), whale),
      range,
      pagerOptions({ prefetch: 8 }),
      (page) => {
        for (const e of page.entries as { block_number: string }[])
          if (!(Number(e.block_number) >= range.from && Number(e.block_number) <= range.to)) outside++;
      },
      false,
    );
    expect(r.count).toBe(count);
    expect(r.keys.size).toBe(count);
    expect(outside).toBe(0);
    expect(r.progress).toMatchObject({ rowsExpected: count, rowsGot: count, driftRefetches: 0 });
    expect(r.progress.splits).toBeGreaterThan(0);
    // Requests per row within 5 % of the minimum (one request per 1000 rows).
    expect(r.acct.requests).toBeLessThanOrEqual(Math.ceil(1.05 * minRequests(count)));
    expect(sim.stats().requests).toBe(r.acct.requests + 1);
  } finally {
    await t.close();
    await sim.close();
  }
}

describe('the whale exports completely through window splitting', () => {
  it('at small (~110,000 transactions)', () => exportWhale('small'));
  it.runIf(process.env.CHAINLAKE_TEST_LARGE === '1')('at medium (~330,000 transactions)', () => exportWhale('medium'));
  it.runIf(process.env.CHAINLAKE_TEST_LARGE === '1')('at large (≥ 1,000,000 transactions)', () => exportWhale('large'), 180_000);
});

describe('windows against the simulator (small)', () => {
  let sim: RunningSimulator;
  beforeAll(async () => {
    sim = await startSimulator({ seed: 11 });
  });
  afterAll(async () => {
    await sim?.close();
  });

  it('the crowded block is an explicit error naming it; the blocks around it export', async () => {
    const t = transport({ concurrency: 4 });
    try {
      const fetch = txFetcher(explorer(t, sim), sim.examples.crowdedBlockAddress);
      const block = sim.examples.crowdedBlock;
      const err = await collect(fetch, { from: 0, to: sim.head() }, pagerOptions()).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(WindowError);
      expect((err as WindowError).block).toBe(block);
      expect((err as Error).message).toContain(`block ${block} alone holds`);

      for (const range of [
        { from: 0, to: block - 1 },
        { from: block + 1, to: sim.head() },
      ]) {
        const r = await collect(fetch, range, pagerOptions());
        expect(r.rows.length).toBe(await apiCount(sim, sim.examples.crowdedBlockAddress, range));
      }
    } finally {
      await t.close();
    }
  });

  it('event logs (no block number on entries) export completely by bisection, the probe page not fetched twice', async () => {
    const t = transport({ concurrency: 8 });
    try {
      const token = sim.examples.erc20Token;
      const logs = explorerPageFetcher(explorer(t, sim), event_logs.endpoints[0]!, { contract: token, topic0: sim.examples.transferTopic });
      const range = { from: 0, to: sim.head() };
      const keys = new Set<string>();
      const r = await collect(
        logs,
        range,
        pagerOptions({ prefetch: 8 }),
        (page) => {
          for (const e of page.entries as { transaction_hash: string; log_index: string }[]) keys.add(`${e.transaction_hash.toLowerCase()}:${e.log_index}`);
        },
        false,
      );
      const u = new URL(`${sim.urls.mainnet}/v1/event-logs`);
      for (const [k, v] of Object.entries({ address: token, topic_0: sim.examples.transferTopic, limit: 1, start_block: range.from, end_block: range.to }))
        u.searchParams.set(k, String(v));
      const count = Number(((await (await fetch(u, { headers: { 'api-key': sim.apiKey } })).json()) as { results: { count: string } }).results.count);
      expect(count).toBeGreaterThan(10_000);
      expect(r.count).toBe(count);
      expect(keys.size).toBe(count);
      expect(r.progress.splits).toBeGreaterThan(0);
      // Bisection costs a short last page per part, and no second fetch of the probe page.
      expect(r.acct.requests).toBeLessThanOrEqual(minRequests(count) + r.progress.parts);
    } finally {
      await t.close();
    }
  });

  it('many small windows take exactly one request per 1000 rows', async () => {
    const t = transport({ concurrency: 8 });
    try {
      const client = explorer(t, sim);
      let requests = 0;
      let min = 0;
      for (const address of sim.examples.addresses) {
        for (const range of [
          { from: 0, to: 11_999 },
          { from: 12_000, to: 23_999 },
          { from: 24_000, to: sim.head() },
        ]) {
          const r = await collect(txFetcher(client, address), range, pagerOptions());
          expect(r.rows.length).toBe(await apiCount(sim, address, range));
          requests += r.acct.requests;
          min += minRequests(r.rows.length);
        }
      }
      expect(requests).toBe(min);
    } finally {
      await t.close();
    }
  });

  it('a moving head during paging causes no duplicate and no gap (window pinned below the head)', async () => {
    const t = transport({ concurrency: 4 });
    const head = sim.head();
    try {
      const fetch = txFetcher(explorer(t, sim), sim.examples.whale);
      const range = { from: head - 5_000, to: head };
      const before = await apiCount(sim, sim.examples.whale, range);
      for (const prefetch of [1, 4]) {
        let moved = 0;
        const r = await collect(fetch, range, pagerOptions({ prefetch }), () => {
          sim.advanceHead(25);
          moved += 25;
        });
        expect(moved).toBeGreaterThan(50);
        expect(r.rows.length).toBe(before);
        expect(distinct(r.rows)).toBe(before);
        expect(r.progress.driftRefetches).toBe(0);
      }
      // New blocks did bring new rows, above the pinned window.
      expect(await apiCount(sim, sim.examples.whale, { from: range.from, to: sim.head() })).toBeGreaterThan(before);
    } finally {
      await t.close();
    }
  });

  it('a window reaching past the head drifts while the head moves, and is refetched whole', async () => {
    const t = transport({ concurrency: 4 });
    try {
      const fetch = txFetcher(explorer(t, sim), sim.examples.whale);
      const head = sim.head();
      const range = { from: head - 5_000, to: head + 1_000 };
      let pages = 0;
      const r = await collect(fetch, range, pagerOptions({ prefetch: 1 }), () => {
        if (++pages === 2) sim.advanceHead(40);
      });
      const now = await apiCount(sim, sim.examples.whale, range);
      expect(r.progress.driftRefetches).toBe(1);
      expect(r.pages.at(-1)!.generation).toBe(1);
      expect(r.rows.length).toBe(now);
      expect(distinct(r.rows)).toBe(now);
    } finally {
      await t.close();
    }
  });
});
