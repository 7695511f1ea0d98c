import { existsSync } from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { onTestHook } from '../../src/load/test-hooks.js';
import { parseJob } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { verifySession } from '../../src/pipeline/verify/session.js';
import { PRESETS } from '../../src/simulator/chain.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { REFERENCE_DIR, withReference } from '../ducklake/helpers.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';

// Finality on one machine: windows above head - depth are provisional, fetched again by the next run, and their
// rows replaced (docs/lake.md, "Finality").
const H0 = PRESETS.small.visibleBlocks;
const DEPTH = 6;
const DATASETS = ['transactions', 'erc20_transfers', 'internal_transactions'] as const;
/** The first block of every run: enough blocks below the unfinal zone (and the reorganisation's reach) to hold final windows. */
const FROM = H0 - 100;

let dir: string;
let cleanup: () => Promise<void>;
const sims: RunningSimulator[] = [];
beforeAll(async () => {
  ({ dir, cleanup } = await tempDir());
});
afterAll(async () => {
  await Promise.all(sims.map((s) => s.close()));
  await cleanup?.();
});

const start = async (opts: Parameters<typeof startSimulator>[0]) => {
  const sim = await startSimulator({ seed: 36, ...opts });
  sims.push(sim);
  return sim;
};

const job = (sim: RunningSimulator, lake: string, finalityDepth = DEPTH) => {
  const addresses = [sim.examples.whale, ...sim.examples.addresses.slice(0, 2)];
  return parseJob(
    {
      name: 'finality',
      target: 'simulator',
      lake,
      range: { incremental: true, fromBlock: FROM, safetyMarginBlocks: 2, finalityDepth },
      datasets: Object.fromEntries(DATASETS.map((d) => [d, { addresses }])),
    },
    'finality-test',
    process.env,
  );
};

/** The watermarks never pass head - depth, and the windows reaching above it (only those) are provisional. */
async function expectFinality(lake: string, runId: string, head: number): Promise<void> {
  const marks = await queryCatalog(lake, 'SELECT block FROM watermarks');
  expect(marks.length).toBeGreaterThan(0);
  for (const m of marks) expect(Number(m.block)).toBeLessThanOrEqual(head - DEPTH);
  const windows = await queryCatalog(lake, `SELECT to_block, status FROM windows WHERE run_id = '${runId}' AND from_block IS NOT NULL`);
  expect(windows.length).toBeGreaterThan(0);
  for (const w of windows) expect(w.status).toBe(Number(w.to_block) > head - DEPTH ? 'provisional' : 'committed');
  expect(windows.some((w) => w.status === 'provisional')).toBe(true);
}

/** A dataset's rows without what changes from run to run (the run, the ingestion time, the confirmations). */
async function content(lake: string, dataset: string): Promise<string> {
  const rows = await queryCatalog(
    lake,
    `SELECT * EXCLUDE (_run_id, _ingested_at${['internal_transactions', 'event_logs'].includes(dataset) ? '' : ', confirmations'}) FROM ${dataset} ORDER BY ALL`,
  );
  expect(rows.length).toBeGreaterThan(0);
  return JSON.stringify(rows, (_, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
}

/**
 * A clean run of `job` at H0 + 3, from a simulator with neither reorganisation nor lag: what the reorganised lake
 * and the lagging one must equal. Built once for the file, by the first test that asks.
 */
let cleanRun: Promise<string> | undefined;
const cleanAtH0Plus3 = () =>
  (cleanRun ??= (async () => {
    const clean = await start({});
    clean.advanceHead(3);
    const lake = path.join(dir, 'clean');
    expect((await runJob(job(clean, lake), { simulator: clean })).status).toBe('complete');
    return lake;
  })());

/** The decoded ERC-20 transfers' `columns`, as sorted text. */
const decoded = async (lake: string, columns: string): Promise<string[]> =>
  (await queryCatalog(lake, `SELECT ${columns} FROM erc20_transfer_events ORDER BY ALL`)).map((r) =>
    JSON.stringify(r, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v)),
  );

const rowsOf = (lake: string, dataset: string) =>
  queryCatalog(lake, `SELECT transaction_hash, block_number FROM ${dataset}`).then(
    (rows) => new Set(rows.map((r) => `${String(r.transaction_hash)}@${String(r.block_number)}`)),
  );

describe('finality', () => {
  it('a reorganised head: the next run replaces the provisional windows, and the lake equals a clean run at the new head', async () => {
    const sim = await start({ reorg: { at: H0, depth: 4, reach: 8 } });
    const lake = path.join(dir, 'reorg');
    const first = await runJob(job(sim, lake), { simulator: sim });
    expect(first.status).toBe('complete');
    await expectFinality(lake, first.runId, H0);
    const before = await rowsOf(lake, 'transactions');

    // The chain reorganises its last blocks and the head moves on (fewer blocks than the fork took from above).
    sim.advanceHead(3);
    const second = await runJob(job(sim, lake), { simulator: sim });
    expect(second.status).toBe('complete');
    await expectFinality(lake, second.runId, H0 + 3);
    // Run 2's windows cover the blocks run 1 left provisional; those below the new final block are committed now.
    const covering = await queryCatalog(
      lake,
      `SELECT min(from_block) AS lo, max(to_block) FILTER (WHERE status = 'committed') AS final_to FROM windows WHERE run_id = '${second.runId}'`,
    );
    expect(Number(covering[0]!.lo)).toBeLessThanOrEqual(H0 - DEPTH + 1);
    expect(Number(covering[0]!.final_to)).toBe(H0 + 3 - DEPTH);

    const cleanLake = await cleanAtH0Plus3();
    for (const d of DATASETS) expect(await content(lake, d), d).toBe(await content(cleanLake, d));
    // The fork's rows (a transaction in a block it is not in, or not mined at all yet) are gone.
    const after = await rowsOf(lake, 'transactions');
    const gone = [...before].filter((r) => !after.has(r));
    expect(gone.length).toBeGreaterThan(0);
    const canonical = await rowsOf(cleanLake, 'transactions');
    for (const r of gone) expect(canonical.has(r)).toBe(false);
  });

  it('a lagging index: the first run is short in its provisional windows, the next one completes them', async () => {
    const sim = await start({ indexLagBlocks: 4 });
    const lake = path.join(dir, 'lag');
    const first = await runJob(job(sim, lake), { simulator: sim });
    await expectFinality(lake, first.runId, H0);
    const short = await queryCatalog(lake, `SELECT count(*) AS n FROM transactions WHERE block_number > ${H0 - 4}`);
    expect(Number(short[0]!.n)).toBe(0);

    sim.advanceHead(7);
    const second = await runJob(job(sim, lake), { simulator: sim });
    await expectFinality(lake, second.runId, H0 + 7);

    // The lagging explorer at H0 + 7 has indexed up to H0 + 3: the lake holds what a complete index at H0 + 3 holds.
    const cleanLake = await cleanAtH0Plus3();
    for (const d of DATASETS) expect(await content(lake, d), d).toBe(await content(cleanLake, d));
    const filled = await queryCatalog(lake, `SELECT count(*) AS n FROM transactions WHERE block_number BETWEEN ${H0 - 3} AND ${H0}`);
    expect(Number(filled[0]!.n)).toBeGreaterThan(0);
  });

  it('event_logs, whose rows carry no block: a reorganised log is gone after the next run, the others stay, two scopes of one contract; its decoded row goes in the commit that replaces its window, the decoded rows equal a clean run’s and verify holds', async () => {
    // The real dialect lists a contract's logs without topics: one contract as two scopes (all its logs, its
    // Transfers), so a Transfer log is listed by both, and each scope replaces only the rows it lists. The job
    // decodes the ERC-20 events in its run: a reorganised log's decoded row must go with it (issue 36).
    const logsJob = (sim: RunningSimulator, lake: string) =>
      parseJob(
        {
          name: 'finality-logs',
          target: 'simulator',
          lake,
          range: { incremental: true, fromBlock: FROM, safetyMarginBlocks: 2, finalityDepth: DEPTH },
          datasets: {
            event_logs: {
              contracts: [{ address: sim.examples.erc20Token }, { address: sim.examples.erc20Token, topics: [sim.examples.transferTopic] }],
            },
          },
          decode: { standard: ['erc20'] },
        },
        'finality-logs-test',
        process.env,
      );
    const logs = (lake: string) =>
      queryCatalog(lake, 'SELECT transaction_hash, log_index, timestamp FROM event_logs').then(
        (rows) => new Set(rows.map((r) => `${String(r.transaction_hash)}/${String(r.log_index)}@${String(r.timestamp)}`)),
      );
    const sim = await start({ dialect: 'real', reorg: { at: H0, depth: 4, reach: 8 } });
    const lake = path.join(dir, 'logs-reorg');
    const first = await runJob(logsJob(sim, lake), { simulator: sim });
    expect(first.status).toBe('complete');
    await expectFinality(lake, first.runId, H0);
    const before = await logs(lake);
    const decodedBefore = await decoded(lake, 'transaction_hash, log_index');

    sim.advanceHead(3);
    const second = await runJob(logsJob(sim, lake), { simulator: sim });
    expect(second.status).toBe('complete');
    await expectFinality(lake, second.runId, H0 + 3);
    // The two scopes' windows share their ranges: each block's time is asked once in the run.
    const asked = await queryCatalog(lake, `SELECT path FROM requests WHERE run_id = '${second.runId}' AND endpoint = 'block'`);
    expect(asked.length).toBeGreaterThan(0);
    expect(new Set(asked.map((r) => String(r.path))).size).toBe(asked.length);

    const clean = await start({ dialect: 'real' });
    clean.advanceHead(3);
    const cleanLake = path.join(dir, 'logs-clean');
    expect((await runJob(logsJob(clean, cleanLake), { simulator: clean })).status).toBe('complete');
    expect(await content(lake, 'event_logs')).toBe(await content(cleanLake, 'event_logs'));
    // The fork's logs (in a block they are not in, or not mined yet) are gone; those it did not touch stayed.
    const after = await logs(lake);
    const gone = [...before].filter((r) => !after.has(r));
    expect(gone.length).toBeGreaterThan(0);
    const canonical = await logs(cleanLake);
    for (const r of gone) expect(canonical.has(r)).toBe(false);
    expect([...before].filter((r) => after.has(r)).length).toBeGreaterThan(0);

    // The decoded rows: the clean run's, and those of the fork's logs (decoded once) are gone with them.
    const columns = 'token_address, "timestamp", transaction_hash, log_index, sender, receiver, value';
    expect(await decoded(lake, columns)).toEqual(await decoded(cleanLake, columns));
    const kept = new Set(await decoded(lake, 'transaction_hash, log_index'));
    expect(decodedBefore.filter((k) => !kept.has(k)).length).toBeGreaterThan(0);
    const s = await verifySession(logsJob(sim, lake), { kind: 'local', lake }, {}, { simulator: sim });
    expect(s.rows.length).toBeGreaterThan(0);
    expect(s.rows.filter((r) => r.status === 'differs')).toEqual([]);
  });
});

const HAS_REF = existsSync(path.join(REFERENCE_DIR, 'ducklake.duckdb_extension'));

describe.skipIf(!HAS_REF)('finality of windows a failed run kept', () => {
  afterEach(() => onTestHook());

  it('kept windows above head - depth land provisional (no request sent again), and the next run at a new head fetches them again: the lake equals a clean run at the new head', async () => {
    const sim = await start({ reorg: { at: H0, depth: 4, reach: 8 } });
    const lake = path.join(dir, 'kept-provisional');
    // Another DuckLake writer (a user's DuckDB with the reference extension) inserts a row into transactions and
    // deletes it again before each commit attempt's decision: the table changed, its rows as they were. After three
    // attempts the run fails and keeps what it fetched (pipeline/kept.ts).
    onTestHook(async (step) => {
      if (step !== 'prepared') return;
      await withReference(
        path.join(lake, 'catalog.duckdb'),
        [
          `INSERT INTO lake.transactions (transaction_hash, block_number, transaction_index, network, block_date, _run_id, _ingested_at)
           VALUES ('0xref', 1, 0, 'mainnet', DATE '2026-01-01', 'reference', TIMESTAMPTZ '2026-01-01 00:00:00+00')`,
          `DELETE FROM lake.transactions WHERE transaction_hash = '0xref'`,
        ],
        { as: 'lake' },
      );
    });
    await expect(runJob(job(sim, lake), { simulator: sim })).rejects.toMatchObject({ code: 'CHAINLAKE_LAKE_CHANGED' });
    onTestHook();
    const kept = await queryCatalog(lake, `SELECT run_id, to_block FROM windows WHERE status = 'fetched' AND from_block IS NOT NULL`);
    const keptRun = String(kept[0]!.run_id);
    // Some of what it kept reaches above the last final block: provisional windows.
    expect(kept.some((w) => Number(w.to_block) > H0 - DEPTH)).toBe(true);

    // The next run resumes the failed one's chain (its head, H0): it commits the kept windows, sending no request of
    // theirs, as the failed run would have: those above head - depth provisional, no watermark past it.
    const sent = sim.stats().requests;
    const second = await runJob(job(sim, lake), { simulator: sim });
    expect(second.status).toBe('complete');
    expect(second.fromKept?.windows).toBe(kept.length);
    expect(second.totals.requests).toBe(0);
    expect(sim.stats().requests - sent).toBe(0);
    await expectFinality(lake, keptRun, H0);
    expect(await queryCatalog(lake, `SELECT count(*)::INTEGER AS n FROM windows WHERE run_id = '${keptRun}' AND status = 'fetched'`)).toEqual([{ n: 0 }]);

    // The chain reorganises its last blocks and the head moves on: the provisional windows are fetched again as any
    // run's are, and the lake is a clean run's at the new head.
    sim.advanceHead(3);
    const third = await runJob(job(sim, lake), { simulator: sim });
    expect(third.status).toBe('complete');
    await expectFinality(lake, third.runId, H0 + 3);
    const [covering] = await queryCatalog(lake, `SELECT min(from_block) AS lo FROM windows WHERE run_id = '${third.runId}'`);
    expect(Number(covering!.lo)).toBeLessThanOrEqual(H0 - DEPTH + 1);
    const cleanLake = await cleanAtH0Plus3();
    for (const d of DATASETS) expect(await content(lake, d), d).toBe(await content(cleanLake, d));
  });
});
