// Another DuckLake writer (a user's DuckDB with the reference `ducklake` extension, ../shared/ducklake-ref/) commits to
// the lake while a run prepares its commit: after the run read the partitions it rewrites, before its catalog
// transaction. chainlake's lock does not bind the extension, so the commit checks, holding the catalog before its
// decision, that no snapshot since its read changed its tables, and prepares again from the new rows when one did
// (issue 34): the other writer's rows are never ended by a commit that did not read them.
import { cp, readdir, readFile, rm, stat, truncate, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { chainlakeCodeOf } from '../../src/errors.js';
import type { LakeChangedError } from '../../src/ducklake/conflicts.js';
import { decodeLake } from '../../src/decode/lake.js';
import { resolveDatasets } from '../../src/decode/spec.js';
import { openEngine } from '../../src/load/engine.js';
import { onTestHook } from '../../src/load/test-hooks.js';
import { LakePaths } from '../../src/load/paths.js';
import { compactLake, rebuildCatalog } from '../../src/load/write/maintenance.js';
import { repairIfFree } from '../../src/load/write/recovery.js';
import { loadJobFile, parseJob } from '../../src/pipeline/job.js';
import type { Logger } from '../../src/pipeline/log.js';
import { openLakeReader } from '../../src/load/read/reader.js';
import { lakeStatus } from '../../src/load/read/status.js';
import { estimatePlan } from '../../src/pipeline/estimate.js';
import { runJob } from '../../src/pipeline/run.js';
import { chainFor, startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { A_ERC20_0 } from '../../src/simulator/chain.js';
import { STANDARD_SIGNATURES } from '../../src/simulator/token-events.js';
import { parseAbiItem, toEventSelector, type AbiEvent } from 'viem';
import { REFERENCE_DIR, withReference } from '../ducklake/helpers.js';
import type { DuckDBConnection } from '@duckdb/node-api';
import { fetchAllPages } from '../helpers/api.js';
import { runWriter, writeJob } from './helpers.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';

const HAS_REF = existsSync(path.join(REFERENCE_DIR, 'ducklake.duckdb_extension'));
if (!HAS_REF) console.warn(`concurrent-writer tests skipped: the reference ducklake extension is not at ${REFERENCE_DIR} (see its README)`);

type Rows = Record<string, unknown>[];

const withRef = (lake: string, statements: string[], opts: { inlining?: number } = {}): Promise<Rows> =>
  withReference(path.join(lake, 'catalog.duckdb'), statements, { ...opts, as: 'lake' });
const refKeys = async (lake: string) =>
  (await withRef(lake, ['SELECT transaction_hash FROM lake.transactions ORDER BY transaction_hash'])).map((r) => String(r.transaction_hash));

const inserted = (hash: string, day: string, block: number) =>
  `('${hash}', ${block}, 0, 'mainnet', DATE '${day}', 'reference', TIMESTAMPTZ '2026-01-01 00:00:00+00')`;
const INSERT = 'INSERT INTO lake.transactions (transaction_hash, block_number, transaction_index, network, block_date, _run_id, _ingested_at) VALUES ';

let sim: RunningSimulator;
let dir: string;
let cleanup: () => Promise<void>;
let base: string;
let addresses: string[];
/** The keys the second job fetches (its addresses' transactions, as the API lists them). */
let fetched: string[];
/** The days the first job's rows fall on: partitions the second job rewrites. */
let days: string[];

/** A job over `addresses` [from, to). */
const job = (target: string, from: number, to: number) =>
  parseJob(
    { name: 'concurrent', target: 'simulator', lake: target, concurrency: 4, datasets: { transactions: { addresses: addresses.slice(from, to) } } },
    'concurrent-writer-test',
    process.env,
  );

/** A logger that keeps the events it is given. */
const events = (): Logger & { seen: string[] } => {
  const seen: string[] = [];
  return { seen, log: (_level, event) => void seen.push(event) };
};

/**
 * The other writer's commits: one row inlined into the catalog in each day the lake holds, a row of a file of its own
 * in the first day, and a delete (inlined) of a row the run does not fetch again. Returns the deleted key, and the
 * keys the reference reads after its commits. Two sessions of the reference (the file's row needs inlining off,
 * an option of the attach): each costs about half a second, and a test calls this up to a dozen times.
 */
async function otherWriter(lake: string, tag: string): Promise<{ victim: string; keys: string[] }> {
  const catalog = path.join(lake, 'catalog.duckdb');
  const read = async (conn: DuckDBConnection) =>
    (await conn.runAndReadAll('SELECT transaction_hash FROM lake.transactions ORDER BY transaction_hash'))
      .getRowObjectsJS()
      .map((r) => String(r.transaction_hash));
  const victim = await withReference(
    catalog,
    async (conn) => {
      const victim = (await read(conn)).filter((k) => !fetched.includes(k) && !k.startsWith('0xref'))[0]!;
      await conn.run(INSERT + days.map((d, i) => inserted(`0xref-${tag}-${i}`, d, i)).join(', '));
      await conn.run(`DELETE FROM lake.transactions WHERE transaction_hash = '${victim}'`);
      return victim;
    },
    { as: 'lake' },
  );
  const keys = await withReference(
    catalog,
    async (conn) => {
      await conn.run(INSERT + inserted(`0xref-${tag}-file`, days[0]!, 99));
      return read(conn);
    },
    { as: 'lake', inlining: 0 },
  );
  return { victim, keys };
}

const rowsOf = (lake: string) => withRef(lake, ['SELECT * EXCLUDE (_run_id, _ingested_at) FROM lake.transactions ORDER BY ALL']);
let clean: Promise<Rows> | undefined;
/**
 * The rows of a lake a run of the second job made undisturbed, the other writer's three commits after it (tagged
 * `raced0..2`, as the failing runs' are): what a lake whose run another writer beat holds once committed. Made once
 * for the tests that compare with it (after the run: the reference writes a copied lake's files where the catalog
 * says until chainlake has opened the copy).
 */
const cleanLake = (): Promise<Rows> =>
  (clean ??= (async () => {
    const lake = path.join(dir, 'clean');
    await cp(base, lake, { recursive: true });
    expect((await runJob(job(lake, 1, 3), { simulator: sim })).status).toBe('complete');
    for (let i = 0; i < 3; i++) await otherWriter(lake, `raced${i}`);
    return rowsOf(lake);
  })());

beforeAll(async () => {
  if (!HAS_REF) return;
  sim = await startSimulator({ seed: 7 });
  ({ dir, cleanup } = await tempDir('chainlake-concurrent-'));
  addresses = sim.examples.addresses.slice(0, 3);
  base = path.join(dir, 'base');
  expect((await runJob(job(base, 0, 1), { simulator: sim })).status).toBe('complete');
  days = (await queryCatalog(base, 'SELECT DISTINCT CAST(block_date AS VARCHAR) AS d FROM transactions ORDER BY 1')).map((r) => String(r.d));
  const listed = await Promise.all(addresses.slice(1).map((a) => fetchAllPages(`${sim.urls.mainnet}/v1/accounts/${a}/transactions`, sim.apiKey)));
  fetched = [...new Set(listed.flat().map((r) => String(r.transaction_hash).toLowerCase()))];
  // The first job's rows are not all fetched again by the second: the other writer deletes one of those.
  expect((await queryCatalog(base, 'SELECT transaction_hash FROM transactions')).some((r) => !fetched.includes(String(r.transaction_hash)))).toBe(true);
}, 120_000);

afterEach(() => onTestHook());

afterAll(async () => {
  await sim?.close();
  await cleanup?.();
});

describe.skipIf(!HAS_REF)('another DuckLake writer commits while a run prepares its commit (single machine)', () => {
  it("the commit is prepared again from the new rows: the other writer's inserts and delete are kept, with the run's rows", async () => {
    const lake = path.join(dir, 'once');
    await cp(base, lake, { recursive: true });
    let before: string[] | undefined;
    let victim = '';
    onTestHook(async (step) => {
      if (step !== 'prepared' || before) return;
      ({ victim, keys: before } = await otherWriter(lake, 'once'));
    });
    const log = events();
    expect((await runJob(job(lake, 1, 3), { simulator: sim, logger: log })).status).toBe('complete');

    const after = await refKeys(lake);
    expect(after).toEqual([...new Set([...before!, ...fetched])].sort());
    expect(after.filter((k) => k.startsWith('0xref-once'))).toHaveLength(days.length + 1);
    expect(after).not.toContain(victim);
    // chainlake's reader reads what the reference reads.
    const mine = (await queryCatalog(lake, 'SELECT transaction_hash FROM transactions ORDER BY transaction_hash')).map((r) => String(r.transaction_hash));
    expect(mine).toEqual(after);
    // The run's first commit read the lake before the other writer's commits: it was prepared again.
    expect(log.seen).toContain('commit.lake_changed');
  }, 120_000);

  it('a writer that commits at every attempt fails the run with CHAINLAKE_LAKE_CHANGED, undoing nothing; the next run commits what it kept, sending no request again', async () => {
    const lake = path.join(dir, 'always');
    await cp(base, lake, { recursive: true });
    let before: string[] = [];
    const victims: string[] = [];
    let attempts = 0;
    onTestHook(async (step) => {
      if (step !== 'prepared') return;
      const other = await otherWriter(lake, `raced${attempts++}`);
      victims.push(other.victim);
      before = other.keys;
    });
    const failedLog = events();
    const failed = await runJob(job(lake, 1, 3), { simulator: sim, logger: failedLog }).then(
      () => undefined,
      (e: unknown) => e as Error & { hint?: string },
    );
    expect(chainlakeCodeOf(failed)).toBe('CHAINLAKE_LAKE_CHANGED');
    expect(failed?.message).toMatch(/another DuckLake writer committed to transactions .* at each of 3 attempts: chainlake did not commit/);
    expect(failed?.hint).toMatch(/run again/);
    // The hint says what the run kept: every window it fetched (its only commit failed), and the requests not sent again.
    const kept =
      /the (\d+) windows fetched and not committed \((\d+) rows in (\d+) requests: ([^)]*)\) are kept: the next run, which resumes this one, commits them without sending those \3 requests again/.exec(
        failed?.hint ?? '',
      );
    expect(kept, failed?.hint).not.toBeNull();
    expect(failed?.hint).not.toMatch(/fetched again/);
    const [windows, rows, requests] = kept!.slice(1, 4).map(Number) as [number, number, number];
    expect(windows).toBe(2);
    expect(requests).toBeGreaterThan(0);
    for (const a of addresses.slice(1)) expect(kept![4]).toContain(a.toLowerCase());
    expect(attempts).toBe(3);
    expect(failedLog.seen).toContain('run.not_committed');
    // Nothing of the run's commit landed, and nothing of the other writer's was undone.
    expect(await refKeys(lake)).toEqual(before);
    const [runs] = await queryCatalog(lake, `SELECT count(*) FILTER (WHERE status = 'failed')::INTEGER AS failed FROM runs`);
    expect(runs).toEqual({ failed: 1 });
    const [record] = await queryCatalog(
      lake,
      `SELECT run_id, CAST(report -> 'kept' AS VARCHAR) AS kept, CAST(report -> 'fetchedAgain' AS VARCHAR) AS again FROM runs WHERE status = 'failed'`,
    );
    expect(JSON.parse(String(record!.kept))).toMatchObject({ windows, rows, requests });
    expect(record!.again).toBeNull();
    // The ledger keeps them as a distributed worker's windows wait for the next commit: `fetched`, with their requests.
    const [ledger] = await queryCatalog(
      lake,
      `SELECT count(*)::INTEGER AS n, sum(requests)::INTEGER AS requests FROM windows WHERE run_id = '${String(record!.run_id)}' AND status = 'fetched'`,
    );
    expect(ledger).toEqual({ n: windows, requests });

    onTestHook();
    // `status` lists them as fetched and not committed, with their rows and requests.
    const paths = new LakePaths(lake);
    const reader = await openLakeReader(paths);
    try {
      const status = await lakeStatus(reader.conn, paths);
      expect(status.fetchedWindows.map((w) => w.run_id)).toEqual([String(record!.run_id), String(record!.run_id)]);
      expect(status.fetchedWindows.reduce((a, w) => [a[0]! + Number(w.rows), a[1]! + Number(w.requests)], [0, 0])).toEqual([rows, requests]);
    } finally {
      reader.close();
    }
    // `plan` counts them apart from what it would fetch: nothing, every window being kept.
    const plan = await estimatePlan(job(lake, 1, 3), { probe: false, simulator: sim });
    expect({ toFetch: plan.windows.length, kept: plan.kept, requests: plan.estimatedRequests }).toEqual({ toFetch: 0, kept: windows, requests: 0 });
    const log = events();
    const sent = sim.stats().requests;
    const next = await runJob(job(lake, 1, 3), { simulator: sim, logger: log });
    expect(next.status).toBe('complete');
    // Every window was kept: the next run sends no request, and commits them all.
    expect(sim.stats().requests - sent).toBe(0);
    expect(log.seen).toContain('run.kept_taken');
    expect(log.seen).not.toContain('run.kept_lost');
    expect({ windows: next.totals.windows, rows: next.totals.rows, requests: next.totals.requests }).toEqual({ windows, rows, requests: 0 });
    expect(next.fromKept).toEqual({ windows, rows, requests, runs: [String(record!.run_id)] });
    // Nobody else wrote meanwhile: its commits were each prepared once.
    expect(log.seen).not.toContain('commit.lake_changed');
    const after = await refKeys(lake);
    expect(after).toEqual([...new Set([...before, ...fetched])].sort());
    for (const v of victims) expect(after).not.toContain(v);
    // The kept windows are the failed run's, committed now; their kept files are gone with them.
    expect(await queryCatalog(lake, `SELECT status, count(*)::INTEGER AS n FROM windows WHERE run_id = '${String(record!.run_id)}' GROUP BY status`)).toEqual([
      { status: 'committed', n: windows },
    ]);
    expect(await readdir(path.join(lake, '_kept')).catch(() => [])).toEqual([]);
    // The lake holds what a run nobody disturbed holds with the same other writer's commits.
    const cleanRows = await cleanLake();
    expect(cleanRows.length).toBe(after.length);
    expect(await rowsOf(lake)).toEqual(cleanRows);
  }, 120_000);

  it('a kept window whose data is damaged is fetched again, and only it; a run killed while it commits kept windows, before or after deciding, ends in the lake a clean run makes', async () => {
    const file = await writeJob(path.join(dir, 'kept.json'), sim, path.join(dir, 'kept-failed'), addresses.slice(1, 3));
    const keptJob = async (lake: string) => ({
      ...(await loadJobFile(file, { CHAINLAKE_API_KEY: sim.apiKey })),
      lake: { ...(await loadJobFile(file, { CHAINLAKE_API_KEY: sim.apiKey })).lake, dir: lake },
    });
    // A run whose every commit attempt another writer beats: it keeps its windows. Made once, and each case below
    // starts from a copy of it (taken in by a chainlake reader, which points the copy's catalog at its own files).
    const failed = path.join(dir, 'kept-failed');
    await cp(base, failed, { recursive: true });
    let attempt = 0;
    onTestHook(async (step) => {
      if (step === 'prepared') await otherWriter(failed, `raced${attempt++}`);
    });
    await expect(runJob(await keptJob(failed))).rejects.toMatchObject({ code: 'CHAINLAKE_LAKE_CHANGED' });
    onTestHook();
    const fetchedWindows = await queryCatalog(
      failed,
      `SELECT run_id, window_id, requests::INTEGER AS requests, CAST(spec AS VARCHAR) AS spec FROM windows WHERE status = 'fetched' ORDER BY window_id`,
    );
    expect(fetchedWindows).toHaveLength(2);
    const kept = {
      runId: String(fetchedWindows[0]!.run_id),
      windows: fetchedWindows.map((w) => ({ window_id: String(w.window_id), requests: Number(w.requests), spec: String(w.spec) })),
    };
    const copyOfFailed = async (lake: string): Promise<void> => {
      await cp(failed, lake, { recursive: true });
      (await openLakeReader(new LakePaths(lake))).close();
    };
    const want = await cleanLake();
    const keptIn = async (l: string) => readdir(path.join(l, '_kept')).catch(() => [] as string[]);

    // Damaged: one kept file loses its last byte. That window is fetched again (exactly its requests), the other is not.
    const damaged = path.join(dir, 'kept-damaged');
    await copyOfFailed(damaged);
    const victim = kept.windows[0]!;
    const spec = JSON.parse(victim.spec) as { kept: { files: { rows?: { path: string }; pages: { path: string }[] } } };
    const keptFile = path.join(damaged, spec.kept.files.pages[0]?.path ?? spec.kept.files.rows!.path);
    await truncate(keptFile, (await stat(keptFile)).size - 1);
    const log = events();
    const sent = sim.stats().requests;
    const next = await runJob(await keptJob(damaged), { logger: log });
    expect(next.status).toBe('complete');
    expect(log.seen).toContain('run.kept_lost');
    expect(sim.stats().requests - sent).toBe(victim.requests);
    expect(next.fromKept).toMatchObject({ windows: 1, requests: kept.windows[1]!.requests, runs: [kept.runId] });
    expect(await queryCatalog(damaged, `SELECT window_id, status FROM windows WHERE run_id = '${kept.runId}' ORDER BY window_id`)).toEqual([
      { window_id: victim.window_id, status: 'failed' },
      { window_id: kept.windows[1]!.window_id, status: 'committed' },
    ]);
    expect(await rowsOf(damaged)).toEqual(want);
    expect(await keptIn(damaged)).toEqual([]);

    // Killed while committing the kept windows: before its decision (they stay kept), and after it (recovery lands them).
    for (const crash of ['prepared', 'journal']) {
      const lake = path.join(dir, `kept-killed-${crash}`);
      await copyOfFailed(lake);
      const k = kept;
      const cli = await writeJob(path.join(dir, `kept-killed-${crash}.json`), sim, lake, addresses.slice(1, 3));
      await writeFile(cli, JSON.stringify({ ...JSON.parse(await readFile(cli, 'utf8')), name: 'kept' }));
      const sentBefore = sim.stats().requests;
      expect((await runWriter(['run', cli, '-q'], { apiKey: sim.apiKey, crash })).signal, crash).toBe('SIGKILL');
      if (crash === 'journal') {
        // Decided: the next command's recovery lands it (the run's final record with it: the job is complete).
        expect((await repairIfFree(new LakePaths(lake), 'test'))?.finished, crash).toHaveLength(1);
      } else {
        // Not decided: the kept windows are still kept, and the next run commits them.
        expect((await runJob(await keptJob(lake))).status, crash).toBe('complete');
      }
      // No kept window's request was sent again, by the killed run or after it.
      expect(sim.stats().requests - sentBefore, crash).toBe(0);
      expect(await queryCatalog(lake, `SELECT status, count(*)::INTEGER AS n FROM windows WHERE run_id = '${k.runId}' GROUP BY status`), crash).toEqual([
        { status: 'committed', n: 2 },
      ]);
      expect(await rowsOf(lake), crash).toEqual(want);
      expect(await keptIn(lake), crash).toEqual([]);
    }
  }, 180_000);

  /**
   * compact on a lake whose days hold rows the reference inlined (partitions to compact), the reference running `call`
   * once the first batch is merged: the batch is merged again, and the rows after are the reference's, one per key.
   */
  async function compactRaced(name: string, call: string, setup: string[] = []): Promise<{ changes: string[]; prepared: number }> {
    const lake = path.join(dir, name);
    await cp(base, lake, { recursive: true });
    // The copy's catalog records where its files are (the reference writes its files there).
    await rebuildCatalog(new LakePaths(lake));
    await withRef(lake, [INSERT + days.map((d, i) => inserted(`0xref-${name}-${i}`, d, i)).join(', ')]);
    for (const statement of setup) await withRef(lake, [statement], { inlining: 0 });
    let prepared = 0;
    let before: string[] = [];
    onTestHook(async (step) => {
      if (step !== 'prepared' || prepared++ > 0) return;
      await withRef(lake, [call]);
      before = await refKeys(lake);
    });
    const changes: string[] = [];
    const report = await compactLake(new LakePaths(lake), { again: (e) => changes.push(...e.later.map((c) => c.changes)) });
    expect(report).toMatchObject({ partitions: days.length });
    const after = await refKeys(lake);
    expect(after).toEqual(before);
    expect(after.filter((k) => k.startsWith(`0xref-${name}`))).toHaveLength(days.length);
    // One row per key, read alike by chainlake's reader; and compact: every day one file, nothing inlined current.
    expect(new Set(after).size).toBe(after.length);
    expect((await queryCatalog(lake, 'SELECT transaction_hash FROM transactions ORDER BY transaction_hash')).map((r) => String(r.transaction_hash))).toEqual(
      after,
    );
    expect(await compactLake(new LakePaths(lake))).toMatchObject({ partitions: 0, alreadyCompact: days.length });
    return { changes, prepared };
  }

  it('compact merges a batch again when the reference flushes its inlined rows meanwhile (inline_flush): nothing lost, nothing doubled', async () => {
    const { changes, prepared } = await compactRaced('flushed', "CALL ducklake_flush_inlined_data('lake')");
    expect(prepared).toBe(2);
    expect(changes).toEqual([expect.stringMatching(/^inline_flush:\d+$/)]);
  }, 120_000);

  it('compact merges a batch again when the reference merges adjacent files meanwhile (merge_adjacent): nothing lost, nothing doubled', async () => {
    // A second file in each day (beside chainlake's): files for the reference to merge.
    const { changes, prepared } = await compactRaced(
      'adjacent',
      "CALL ducklake_merge_adjacent_files('lake')",
      days.map((d, i) => INSERT + inserted(`0xref-file-adjacent-${i}`, d, 50 + i)),
    );
    expect(prepared).toBe(2);
    expect(changes).toEqual([expect.stringMatching(/^merge_adjacent:\d+$/)]);
  }, 120_000);

  it('compact fails with CHAINLAKE_LAKE_CHANGED after 3 attempts when the other writer commits at each, undoing nothing; the next compacts', async () => {
    const lake = path.join(dir, 'compact-always');
    await cp(base, lake, { recursive: true });
    await withRef(lake, [INSERT + days.map((d, i) => inserted(`0xref-compact-${i}`, d, i)).join(', ')]);
    let before: string[] = [];
    let attempts = 0;
    onTestHook(async (step) => {
      if (step !== 'prepared') return;
      before = (await otherWriter(lake, `during${attempts++}`)).keys;
    });
    const failed = await compactLake(new LakePaths(lake)).then(
      () => undefined,
      (e: unknown) => e as Error & { hint?: string },
    );
    expect(chainlakeCodeOf(failed)).toBe('CHAINLAKE_LAKE_CHANGED');
    expect(failed?.message).toMatch(/at each of 3 attempts: chainlake did not commit/);
    expect(failed?.hint).toBe(
      'run again once the other writer is idle: compact committed 0 of its 1 batches before; running it again compacts the partitions left',
    );
    expect(attempts).toBe(3);
    expect(await refKeys(lake)).toEqual(before);
    onTestHook();
    expect(await compactLake(new LakePaths(lake))).toMatchObject({ partitions: days.length });
    expect(await refKeys(lake)).toEqual(before);
  }, 120_000);

  it("chainlake decode decodes again when another writer changes a decoded table meanwhile: its rows are a clean decoding's", async () => {
    const transfer = toEventSelector(parseAbiItem(STANDARD_SIGNATURES.erc20Transfer) as AbiEvent);
    const clean = path.join(dir, 'decode-existing-clean');
    const doc = {
      name: 'logs',
      target: 'simulator',
      lake: clean,
      range: { fromBlock: 0, toBlock: 2_000 },
      datasets: { event_logs: { contracts: [{ address: chainFor(7, 'small', 'mainnet').addrLower(A_ERC20_0), topics: [transfer] }] } },
    };
    expect((await runJob(parseJob(doc, 'decode-existing', process.env), { simulator: sim })).status).toBe('complete');
    const raced = path.join(dir, 'decode-existing-raced');
    await cp(clean, raced, { recursive: true });
    await rebuildCatalog(new LakePaths(raced));
    const decode = async (lake: string, again?: (e: LakeChangedError) => void) => {
      const paths = new LakePaths(lake);
      const runId = `decode-${path.basename(lake)}-${Date.now()}`;
      const staging = paths.staging(runId);
      const engine = await openEngine({ tempDir: path.join(staging, 'tmp') });
      try {
        const datasets = await resolveDatasets({ standard: ['erc20'], contracts: [] }, { engine, paths, network: 'mainnet' });
        return await decodeLake({
          engine,
          paths,
          network: 'mainnet',
          datasets,
          runId,
          ingestedAt: new Date().toISOString(),
          stagingDir: staging,
          ...(again ? { again } : {}),
        });
      } finally {
        engine.close();
      }
    };
    const want = await decode(clean);
    await decode(raced);
    // Decoding again, the other writer deletes a decoded row once the decoding is merged, before its commit.
    let prepared = 0;
    onTestHook(async (step) => {
      if (step !== 'prepared' || prepared++ > 0) return;
      await withRef(raced, ['DELETE FROM lake.erc20_transfer_events WHERE transaction_hash = (SELECT min(transaction_hash) FROM lake.erc20_transfer_events)']);
    });
    const changes: string[] = [];
    const got = await decode(raced, (e) => changes.push(...e.later.map((c) => c.changes)));
    expect(prepared).toBe(2);
    expect(changes).toEqual([expect.stringMatching(/^inlined_delete:\d+$/)]);
    expect(got.datasets).toEqual(want.datasets);
    const rows = (lake: string) => queryCatalog(lake, 'SELECT * EXCLUDE (_run_id, _ingested_at) FROM erc20_transfer_events ORDER BY ALL');
    const decoded = await rows(clean);
    expect(decoded.length).toBeGreaterThan(0);
    expect(await rows(raced)).toEqual(decoded);
    const refCount = await withRef(raced, ['SELECT count(*)::INTEGER AS n FROM lake.erc20_transfer_events']);
    expect(refCount).toEqual([{ n: decoded.length }]);
  }, 120_000);

  it('catalog rebuild from disk merges a batch again when another writer commits to the rebuilt catalog meanwhile: its rows are kept', async () => {
    const lake = path.join(dir, 'rebuild');
    await cp(base, lake, { recursive: true });
    const baseKeys = await refKeys(base);
    // A lost catalog: the rebuild salvages what it can, and merges every partition's files on disk into the new one.
    await rm(path.join(lake, 'catalog.duckdb'), { force: true });
    let prepared = 0;
    onTestHook(async (step) => {
      if (step !== 'prepared' || prepared++ > 0) return;
      await withRef(lake, [INSERT + inserted('0xref-rebuild', days[0]!, 1)]);
    });
    const report = await rebuildCatalog(new LakePaths(lake));
    expect(report.partitionsFromDisk).toBe(days.length);
    expect(prepared).toBe(2);
    const after = await refKeys(lake);
    expect(after).toEqual([...baseKeys, '0xref-rebuild'].sort());
    expect((await queryCatalog(lake, 'SELECT transaction_hash FROM transactions ORDER BY transaction_hash')).map((r) => String(r.transaction_hash))).toEqual(
      after,
    );
  }, 120_000);

  it('catalog rebuild from disk that another writer refuses 3 times fails with CHAINLAKE_LAKE_CHANGED; the next rebuild reads the disk again', async () => {
    const lake = path.join(dir, 'rebuild-always');
    await cp(base, lake, { recursive: true });
    const baseKeys = await refKeys(base);
    await rm(path.join(lake, 'catalog.duckdb'), { force: true });
    let attempts = 0;
    onTestHook(async (step) => {
      if (step !== 'prepared') return;
      await withRef(lake, [INSERT + inserted(`0xref-rebuild-${attempts++}`, days[0]!, 1)]);
    });
    const failed = await rebuildCatalog(new LakePaths(lake)).then(
      () => undefined,
      (e: unknown) => e as Error & { hint?: string },
    );
    expect(chainlakeCodeOf(failed)).toBe('CHAINLAKE_LAKE_CHANGED');
    expect(failed?.hint).toBe(
      'run again once the other writer is idle: the partitions of 0 earlier batches were rebuilt from disk and stay; catalog rebuild run again rebuilds the others from disk',
    );
    expect(attempts).toBe(3);
    onTestHook();
    // The catalog is sound now, but its tables hold only the other writer's rows: the rebuild reads the disk again.
    const report = await rebuildCatalog(new LakePaths(lake));
    expect(report.partitionsFromDisk).toBe(days.length);
    const after = await refKeys(lake);
    expect(after).toEqual([...baseKeys, '0xref-rebuild-0', '0xref-rebuild-1', '0xref-rebuild-2'].sort());
    expect((await queryCatalog(lake, 'SELECT transaction_hash FROM transactions ORDER BY transaction_hash')).map((r) => String(r.transaction_hash))).toEqual(
      after,
    );
    // Finished: a further rebuild only rebuilds the views.
    expect((await rebuildCatalog(new LakePaths(lake))).partitionsFromDisk).toBe(0);
  }, 120_000);

  it("a run killed after deciding its commit, then another writer's commit: the recovery abandons the decided commit instead of undoing it", async () => {
    const lake = path.join(dir, 'killed');
    await cp(base, lake, { recursive: true });
    const file = await writeJob(path.join(dir, 'killed.json'), sim, lake, addresses.slice(1, 3));
    // Decided (the journal written), then killed before anything moved: the catalog is free again.
    expect((await runWriter(['run', file, '-q'], { apiKey: sim.apiKey, crash: 'journal' })).signal).toBe('SIGKILL');
    const { victim, keys: before } = await otherWriter(lake, 'killed');

    expect((await runJob(await loadJobFile(file, { CHAINLAKE_API_KEY: sim.apiKey }))).status).toBe('complete');
    const after = await refKeys(lake);
    expect(after).toEqual([...new Set([...before, ...fetched])].sort());
    expect(after).not.toContain(victim);
    const runs = await queryCatalog(lake, `SELECT status FROM runs ORDER BY started_at`);
    expect(runs.map((r) => r.status)).toEqual(['complete', 'abandoned', 'complete']);
    expect(await queryCatalog(lake, `SELECT run_id FROM commits WHERE recovered_by IS NOT NULL`)).toEqual([]);
  }, 120_000);

  it.each([
    { how: 'in its commit', fromRun: false },
    { how: 'after its last commit (the ABI from its own contracts dataset)', fromRun: true },
  ])(
    "a run that kept its event logs (its commit failed): the next run commits them without requests and decodes them $how; the decoded rows are a clean run's",
    async ({ fromRun }) => {
      const token = chainFor(7, 'small', 'mainnet').addrLower(A_ERC20_0);
      const transfer = toEventSelector(parseAbiItem(STANDARD_SIGNATURES.erc20Transfer) as AbiEvent);
      const name = fromRun ? 'decode-kept-abi' : 'decode-kept';
      const logsJob = (lake: string) =>
        parseJob(
          {
            name,
            target: 'simulator',
            lake,
            range: { fromBlock: 0, toBlock: 2_000 },
            datasets: {
              event_logs: { contracts: [{ address: token, topics: [transfer] }] },
              ...(fromRun ? { contracts: { contracts: [token] } } : {}),
            },
            decode: fromRun ? { contracts: [{ address: token, name: 'token' }] } : { standard: ['erc20'] },
          },
          name,
          process.env,
        );
      const clean = path.join(dir, `${name}-clean`);
      const cleanReport = await runJob(logsJob(clean), { simulator: sim });
      expect(cleanReport.decoded?.datasets.some((d) => d.rows > 0)).toBe(true);
      const lake = path.join(dir, name);
      // At each commit attempt, a row inserted into event_logs and deleted again: the table changed, its rows as they were.
      onTestHook(async (step) => {
        if (step !== 'prepared') return;
        await withRef(lake, [
          `INSERT INTO lake.event_logs (timestamp, transaction_hash, log_index, address, network, block_date, _run_id, _ingested_at)
         VALUES (TIMESTAMPTZ '2026-01-01 00:00:00+00', '0xref-log', 0, '0xref', 'mainnet', DATE '2026-01-01', 'reference', TIMESTAMPTZ '2026-01-01 00:00:00+00')`,
          `DELETE FROM lake.event_logs WHERE transaction_hash = '0xref-log'`,
        ]);
      });
      await expect(runJob(logsJob(lake), { simulator: sim })).rejects.toMatchObject({ code: 'CHAINLAKE_LAKE_CHANGED' });
      onTestHook();
      const [kept] = await queryCatalog(lake, `SELECT count(*)::INTEGER AS n FROM windows WHERE status = 'fetched'`);
      expect(kept!.n).toBeGreaterThan(0);

      const sent = sim.stats().requests;
      const log = events();
      const next = await runJob(logsJob(lake), { simulator: sim, logger: log });
      expect(next.status).toBe('complete');
      expect(next.fromKept?.windows).toBe(kept!.n);
      expect(sim.stats().requests - sent).toBe(0);
      expect(next.decoded).toEqual(cleanReport.decoded);
      // Every table, decoded ones included, holds a clean run's rows.
      const tables = (await queryCatalog(clean, `SELECT table_name FROM ducklake_table WHERE end_snapshot IS NULL ORDER BY 1`)).map((r) =>
        String(r.table_name),
      );
      expect(tables.length).toBeGreaterThan(fromRun ? 3 : 2);
      const rows = (l: string, table: string) => queryCatalog(l, `SELECT * EXCLUDE (_run_id, _ingested_at) FROM ${table} ORDER BY ALL`);
      for (const table of tables) expect(await rows(lake, table), table).toEqual(await rows(clean, table));
    },
    180_000,
  );

  it("a run decoding after its last commit (the ABI from its own contracts dataset) decodes again when another writer changes a decoded table meanwhile (decode.lake_changed): its decoded rows are a clean run's", async () => {
    const token = chainFor(7, 'small', 'mainnet').addrLower(A_ERC20_0);
    const transfer = toEventSelector(parseAbiItem(STANDARD_SIGNATURES.erc20Transfer) as AbiEvent);
    const logsJob = (lake: string) =>
      parseJob(
        {
          name: 'decode-after-raced',
          target: 'simulator',
          lake,
          range: { fromBlock: 0, toBlock: 2_000 },
          datasets: { event_logs: { contracts: [{ address: token, topics: [transfer] }] }, contracts: { contracts: [token] } },
          decode: { contracts: [{ address: token, name: 'token' }] },
        },
        'decode-after-raced',
        process.env,
      );
    const clean = path.join(dir, 'decode-after-clean');
    const cleanReport = await runJob(logsJob(clean), { simulator: sim });
    const decodedTable = cleanReport.decoded!.datasets.find((d) => d.rows > 0)!.name;
    // A lake already decoded, run again: the run's decoding after its last commit replaces decoded rows, one of which
    // the other writer deletes once that decoding is merged, before its commit.
    const raced = path.join(dir, 'decode-after-raced');
    await cp(clean, raced, { recursive: true });
    await rebuildCatalog(new LakePaths(raced));
    const log = events();
    let deleted = false;
    onTestHook(async (step) => {
      // The export's commit logs `commit`; the next commit prepared is the decoding's.
      if (step !== 'prepared' || deleted || !log.seen.includes('commit')) return;
      deleted = true;
      await withRef(raced, [`DELETE FROM lake.${decodedTable} WHERE transaction_hash = (SELECT min(transaction_hash) FROM lake.${decodedTable})`]);
    });
    const report = await runJob(logsJob(raced), { simulator: sim, logger: log });
    expect(deleted).toBe(true);
    expect(log.seen).toContain('decode.lake_changed');
    expect(log.seen).not.toContain('commit.lake_changed');
    expect(report.errors).toEqual([]);
    expect(report.decoded).toEqual(cleanReport.decoded);
    const rows = (lake: string) => queryCatalog(lake, `SELECT * EXCLUDE (_run_id, _ingested_at) FROM ${decodedTable} ORDER BY ALL`);
    const want = await rows(clean);
    expect(want.length).toBeGreaterThan(0);
    expect(await rows(raced)).toEqual(want);
    expect(await withRef(raced, [`SELECT count(*)::INTEGER AS n FROM lake.${decodedTable}`])).toEqual([{ n: want.length }]);
  }, 180_000);

  it('a commit that decodes its event logs, prepared again, lands the decoded rows and counts of a run nobody disturbed', async () => {
    const transfer = toEventSelector(parseAbiItem(STANDARD_SIGNATURES.erc20Transfer) as AbiEvent);
    const logsJob = (lake: string) =>
      parseJob(
        {
          name: 'decode-raced',
          target: 'simulator',
          lake,
          range: { fromBlock: 0, toBlock: 2_000 },
          commit: { everyRows: 150 },
          datasets: { event_logs: { contracts: [{ address: chainFor(7, 'small', 'mainnet').addrLower(A_ERC20_0), topics: [transfer] }] } },
          decode: { standard: ['erc20'] },
        },
        'decode-raced',
        process.env,
      );
    const clean = path.join(dir, 'decode-clean');
    const cleanReport = await runJob(logsJob(clean), { simulator: sim });
    const raced = path.join(dir, 'decode-raced');
    let wrote = false;
    // At the first commit (its tables exist by then), a row inserted into event_logs and deleted again: two snapshots
    // that change the table and leave its rows as they were.
    onTestHook(async (step) => {
      if (step !== 'prepared' || wrote) return;
      wrote = true;
      await withRef(raced, [
        `INSERT INTO lake.event_logs (timestamp, transaction_hash, log_index, address, network, block_date, _run_id, _ingested_at)
         VALUES (TIMESTAMPTZ '2026-01-01 00:00:00+00', '0xref-log', 0, '0xref', 'mainnet', DATE '2026-01-01', 'reference', TIMESTAMPTZ '2026-01-01 00:00:00+00')`,
      ]);
      await withRef(raced, [`DELETE FROM lake.event_logs WHERE transaction_hash = '0xref-log'`]);
    });
    const log = events();
    const racedReport = await runJob(logsJob(raced), { simulator: sim, logger: log });
    expect(log.seen).toContain('commit.lake_changed');
    expect(racedReport.decoded).toEqual(cleanReport.decoded);
    expect(racedReport.totals).toEqual(cleanReport.totals);
    const rows = (lake: string, table: string) => queryCatalog(lake, `SELECT * EXCLUDE (_run_id, _ingested_at) FROM ${table} ORDER BY ALL`);
    for (const table of ['event_logs', 'erc20_transfer_events', '_rejects']) {
      const want = await rows(clean, table);
      if (table !== '_rejects') expect(want.length, table).toBeGreaterThan(0);
      expect(await rows(raced, table), table).toEqual(want);
    }
  }, 120_000);
});
