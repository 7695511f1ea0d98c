import { rename } from 'node:fs/promises';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseJob } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { datasetDigest, queryCatalog, tempDir } from '../helpers/lake.js';

let sim: RunningSimulator;
let dir: string;
let cleanup: () => Promise<void>;
beforeAll(async () => {
  sim = await startSimulator({ seed: 21 });
  ({ dir, cleanup } = await tempDir());
});
afterAll(async () => {
  await sim?.close();
  await cleanup?.();
});

const MARGIN = 10;
const job = (lake: string, incremental: boolean) =>
  parseJob(
    {
      name: 'nightly',
      target: 'simulator',
      lake,
      range: incremental ? { incremental: true, fromBlock: 0, safetyMarginBlocks: MARGIN } : { fromBlock: 0 },
      datasets: { transactions: { addresses: sim.examples.addresses.slice(0, 3) }, erc20_transfers: { addresses: sim.examples.addresses.slice(0, 2) } },
    },
    'incremental-test',
    process.env,
  );

describe('incremental runs', () => {
  it('after the head moves, fetches only new blocks (plus the margin) and equals one full run', async () => {
    const lake = path.join(dir, 'incremental');
    const head1 = sim.head();
    const first = await runJob(job(lake, true), { simulator: sim });
    expect(first.status).toBe('complete');
    expect(first.head).toBe(head1);

    const marks = await queryCatalog(lake, 'SELECT dataset, scope, block FROM watermarks ORDER BY ALL');
    expect(marks).toHaveLength(5);
    for (const m of marks) expect(m.block).toBe(BigInt(head1));

    sim.advanceHead(600);
    const head2 = sim.head();
    const second = await runJob(job(lake, true), { simulator: sim });
    expect(second.status).toBe('complete');
    expect(second.head).toBe(head2);
    const windows = await queryCatalog(lake, `SELECT from_block, to_block, requests FROM windows WHERE run_id = '${second.runId}'`);
    expect(windows).toHaveLength(5);
    for (const w of windows) {
      expect(w.from_block).toBe(BigInt(head1 - MARGIN + 1));
      expect(w.to_block).toBe(BigInt(head2));
    }
    // Only new blocks: far fewer requests than the first run over the whole chain.
    expect(second.totals.requests).toBeLessThan(first.totals.requests);
    for (const m of await queryCatalog(lake, 'SELECT block FROM watermarks')) expect(m.block).toBe(BigInt(head2));

    // A third run with no new block fetches nothing at all.
    const third = await runJob(job(lake, true), { simulator: sim });
    expect(third.windowsSkipped).toBe(5);
    expect(third.totals.windows).toBe(0);

    const full = path.join(dir, 'full');
    const once = await runJob(job(full, false), { simulator: sim });
    expect(once.head).toBe(head2);
    expect(await datasetDigest(lake, 'transactions', 'transaction_hash')).toEqual(await datasetDigest(full, 'transactions', 'transaction_hash'));
    expect(await datasetDigest(lake, 'erc20_transfers', 'transaction_hash')).toEqual(await datasetDigest(full, 'erc20_transfers', 'transaction_hash'));
  });

  it('--full-refresh refetches the whole range; --from-block/--to-block fetch just that range and leave watermarks alone', async () => {
    const lake = path.join(dir, 'incremental');
    const before = await queryCatalog(lake, 'SELECT dataset, scope, block FROM watermarks ORDER BY ALL');
    const refresh = await runJob(job(lake, true), { simulator: sim, fullRefresh: true });
    const w = await queryCatalog(lake, `SELECT min(from_block) AS lo, max(to_block) AS hi FROM windows WHERE run_id = '${refresh.runId}'`);
    expect(w[0]!.lo).toBe(0n);
    expect(w[0]!.hi).toBe(BigInt(sim.head()));

    const backfill = await runJob(job(lake, true), { simulator: sim, rangeOverride: { fromBlock: 1000, toBlock: 2000 } });
    const b = await queryCatalog(lake, `SELECT DISTINCT from_block, to_block FROM windows WHERE run_id = '${backfill.runId}'`);
    expect(b).toEqual([{ from_block: 1000n, to_block: 2000n }]);
    expect(await queryCatalog(lake, 'SELECT dataset, scope, block FROM watermarks ORDER BY ALL')).toEqual(before);
  });

  it('a run on a moved lake with nothing new rebuilds its views at the new place: plain DuckDB reads them again', async () => {
    // The lake of the tests above, its watermarks at the head (the second test's runs left them alone): moved, not
    // copied, so that no view still naming the old place could read it. A run of its own here cost a whole export.
    const lake = path.join(dir, 'incremental');
    expect((await queryCatalog(lake, 'SELECT DISTINCT block FROM watermarks')).map((m) => Number(m.block))).toEqual([sim.head()]);
    const moved = path.join(dir, 'moved');
    await rename(lake, moved);
    const again = await runJob(job(moved, true), { simulator: sim });
    expect(again.totals.windows).toBe(0);
    // Plain DuckDB, not chainlake's reader (which would shadow stale views): the catalog's own views must name the new place.
    const instance = await DuckDBInstance.create(path.join(moved, 'catalog.duckdb'), { access_mode: 'READ_ONLY' });
    try {
      const conn = await instance.connect();
      const count = async (table: string) => (await conn.runAndReadAll(`SELECT count(*)::INTEGER FROM ${table}`)).getRowsJS()[0]![0];
      expect(await count('transactions')).toBeGreaterThan(0);
      expect(await count('erc20_transfers')).toBeGreaterThan(0);
      expect((await conn.runAndReadAll(`SELECT value FROM lake_meta WHERE key = 'root'`)).getRowsJS()).toEqual([[moved]]);
      conn.closeSync();
    } finally {
      instance.closeSync();
    }
  });
});
