/**
 * The one window state machine (src/load/ledger/windows.ts) driven on both catalog databases with the same
 * assertions: DuckDB in-process (a local lake's catalog.duckdb) and a real PostgreSQL (the distributed control plane).
 */
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DuckDbCatalog, type CatalogDb } from '../../src/ducklake/catalog-db.js';
import { PostgresCatalog } from '../../src/ducklake/postgres-catalog.js';
import { ledgerDdl } from '../../src/load/ledger/schema.js';
import {
  moveWindows,
  recordCommitted,
  recordEnded,
  recordFailed,
  recordFetched,
  reofferWindows,
  requeueVoided,
  TRANSITIONS,
  WINDOW_STATES,
  WindowTransitionError,
  type Ledger,
} from '../../src/load/ledger/windows.js';
import { raiseWatermarks, readWatermark } from '../../src/load/ledger/watermarks.js';
import { recordRun } from '../../src/load/ledger/runs.js';
import { startPostgres, type TestPostgres } from '../ducklake/postgres.js';

let pg: TestPostgres | undefined;
const closers: (() => void | Promise<void>)[] = [];

beforeAll(async () => {
  pg = await startPostgres();
}, 120_000);

afterAll(async () => {
  for (const c of closers) await c();
  await pg?.stop();
});

async function duckLedger(): Promise<Ledger> {
  const instance = await DuckDBInstance.create(':memory:');
  const conn = await instance.connect();
  closers.push(() => {
    conn.closeSync();
    instance.closeSync();
  });
  const db = new DuckDbCatalog(conn);
  for (const sql of ledgerDdl('duckdb')) await db.query(sql);
  return { db };
}

async function pgLedger(): Promise<Ledger> {
  const database = await pg!.database();
  const db: CatalogDb = new PostgresCatalog(await database.connect());
  await db.query('CREATE SCHEMA chainlake');
  for (const sql of ledgerDdl('postgres', 'chainlake')) await db.query(sql);
  return { db, schema: 'chainlake' };
}

const W1 = { runId: 'run-1', windowId: 'transactions/mainnet/-/1-100' };
const W2 = { runId: 'run-1', windowId: 'transactions/mainnet/-/101-200' };
const JOB = 'b1a7f5d2-0000-4000-8000-00000000000a';

/** The two catalog databases every case runs on. */
const LEDGERS: [string, () => Promise<Ledger>][] = [
  ['DuckDB', duckLedger],
  ['PostgreSQL', pgLedger],
];

async function statusOf(l: Ledger): Promise<Record<string, unknown>[]> {
  const t = l.schema ? `${l.schema}.windows` : 'windows';
  return l.db.query(
    `SELECT window_id, status, rows_got, from_block, attempts, snapshot_id, committed_at IS NOT NULL AS committed, CAST(job_id AS VARCHAR) AS job FROM ${t} ORDER BY window_id`,
  );
}

describe.each(LEDGERS)('the window state machine on %s', (_name, open) => {
  it('queued -> fetched -> committed, queued -> failed -> queued; refused transitions name the window', async () => {
    const l = await open();
    const t = l.schema ? `${l.schema}.windows` : 'windows';
    await l.db.query(`INSERT INTO ${t} (run_id, window_id, dataset, network, scope, status) VALUES ($1, $2, 'transactions', 'mainnet', '-', 'queued')`, [
      W1.runId,
      W1.windowId,
    ]);
    await l.db.query(`INSERT INTO ${t} (run_id, window_id, dataset, network, scope, status) VALUES ($1, $2, 'transactions', 'mainnet', '-', 'queued')`, [
      W2.runId,
      W2.windowId,
    ]);
    const facts = {
      fragmentPath: 'f.parquet',
      rejectPath: null,
      rowsExpected: 7,
      rowsGot: 7,
      rejects: 0,
      requests: 3,
      retries: 0,
      throttles: 0,
      capHits: 0,
      splits: 0,
      fromBlock: 1,
      toBlock: 100,
      worker: 'w',
    };
    expect(await recordFetched(l, W1, facts)).toBe(true);
    // A second worker's late record finds it fetched already.
    expect(await recordFetched(l, W1, facts)).toBe(false);
    await recordCommitted(l, [W1], 7);
    await expect(recordCommitted(l, [W1], 8)).rejects.toThrow(/window transactions\/mainnet\/-\/1-100 of run run-1 is committed: committed -> committed/);
    // A committed window is not offered again (only a voided one is queued again): refused, naming the window and
    // its state; nothing changes.
    const refused = await reofferWindows(l, [{ ...W1, jobId: JOB }]).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(WindowTransitionError);
    expect((refused as Error).message).toBe(
      'window transactions/mainnet/-/1-100 of run run-1 is committed: this move takes only failed or queued windows to queued',
    );
    // An edge the table does not have is refused before anything is written.
    await expect(moveWindows(l, [W1], 'fetched', { from: ['committed'] })).rejects.toThrow(
      /committed -> fetched is not a transition of a window \(allowed from committed: queued\)/,
    );
    expect(await recordFailed(l, [W1, W2])).toEqual([W2]);
    await reofferWindows(l, [{ ...W2, jobId: JOB }]);
    await expect(reofferWindows(l, [{ runId: 'run-1', windowId: 'nope', jobId: JOB }])).rejects.toThrow(/window nope of run run-1 is not in the ledger/);
    expect(await statusOf(l)).toEqual([
      { window_id: W1.windowId, status: 'committed', rows_got: 7, from_block: 1, attempts: 1, snapshot_id: 7, committed: true, job: null },
      { window_id: W2.windowId, status: 'queued', rows_got: null, from_block: null, attempts: 0, snapshot_id: null, committed: false, job: JOB },
    ]);
    // Voided (its table dropped by another writer): committed -> queued with a new job, saying why, its snapshot gone.
    const AGAIN = '00000000-0000-4000-8000-000000000002';
    await requeueVoided(l, [{ ...W1, jobId: AGAIN }], 'dropped');
    expect((await statusOf(l))[0]).toEqual({
      window_id: W1.windowId,
      status: 'queued',
      rows_got: 7,
      from_block: 1,
      attempts: 1,
      snapshot_id: null,
      committed: false,
      job: AGAIN,
    });
    expect(await l.db.query(`SELECT error FROM ${t} WHERE window_id = $1`, [W1.windowId])).toEqual([{ error: 'dropped' }]);
    await expect(requeueVoided(l, [{ ...W1, jobId: AGAIN }], 'dropped')).rejects.toThrow(/is queued: this move takes only committed or provisional windows/);
  });

  it("records a single-machine run's ended windows in one statement, and refuses a window recorded in a state it cannot start in", async () => {
    const l = await open();
    const ended = (status: 'committed' | 'failed', from: number) => ({
      runId: 'local-1',
      windowId: null,
      dataset: 'blocks',
      network: 'mainnet',
      scope: '-',
      fromBlock: from,
      toBlock: from + 9,
      rowsExpected: 10,
      rowsGot: status === 'committed' ? 10 : 0,
      rejects: 0,
      requests: 2,
      retries: 0,
      throttles: 0,
      capHits: 0,
      splits: 0,
      status,
      error: status === 'failed' ? 'HTTP 500' : null,
    });
    await recordEnded(l, [ended('committed', 0), ended('failed', 10)]);
    const t = l.schema ? `${l.schema}.windows` : 'windows';
    expect(await l.db.query(`SELECT from_block, rows_got, status, error, committed_at IS NOT NULL AS committed FROM ${t} ORDER BY from_block`)).toEqual([
      { from_block: 0, rows_got: 10, status: 'committed', error: null, committed: true },
      { from_block: 10, rows_got: 0, status: 'failed', error: 'HTTP 500', committed: false },
    ]);
    await expect(recordEnded(l, [{ ...ended('committed', 20), status: 'fetched' as 'committed' }])).rejects.toThrow(WindowTransitionError);
  });

  it("raises a commit's watermarks in one statement: a scope listed twice ends at its highest, a lower mark never lowers one", async () => {
    const l = await open();
    const mark = (scope: string, block: number) => ({ network: 'mainnet', dataset: 'transactions', scope, block });
    await raiseWatermarks(l, 'run-1', [mark('a', 100), mark('b', 50)]);
    await raiseWatermarks(l, 'run-2', [mark('a', 80), mark('b', 70), mark('b', 90), mark('b', 60), mark('c', 5)]);
    await raiseWatermarks(l, 'run-3', []);
    const t = l.schema ? `${l.schema}.watermarks` : 'watermarks';
    expect(await l.db.query(`SELECT scope, block::INTEGER AS block, run_id FROM ${t} ORDER BY scope`)).toEqual([
      { scope: 'a', block: 100, run_id: 'run-2' },
      { scope: 'b', block: 90, run_id: 'run-2' },
      { scope: 'c', block: 5, run_id: 'run-2' },
    ]);
    expect(await readWatermark(l, { network: 'mainnet', dataset: 'transactions', scope: 'b' })).toBe(90);
  });
});

it('the transitions table covers every state; committed leaves only for queued (voided)', () => {
  expect(Object.keys(TRANSITIONS).sort()).toEqual([...WINDOW_STATES].sort());
  expect(TRANSITIONS.committed).toEqual(['queued']);
});

describe.each(LEDGERS)("a run's row on %s", (_name, open) => {
  it('names the network, head and range its report names, and keeps them when a later record (the final report) does not', async () => {
    const l = await open();
    const run = { runId: 'run-9', job: 'nightly', startedAt: '2026-11-29T00:00:00.000Z', finishedAt: null, status: 'running' };
    await recordRun(l, { ...run, report: { runId: 'run-9', network: 'testnet', head: 36000, range: { from: 10, to: 36000 } } });
    await recordRun(l, { ...run, finishedAt: '2026-11-29T00:01:00.000Z', status: 'complete', report: { runId: 'run-9', network: 'testnet', head: 36000 } });
    const t = l.schema ? `${l.schema}.runs` : 'runs';
    const rows = await l.db.query(`SELECT status, network, head, range_from, range_to FROM ${t}`);
    expect(rows.map((r) => ({ ...r, head: Number(r.head), range_from: Number(r.range_from), range_to: Number(r.range_to) }))).toEqual([
      { status: 'complete', network: 'testnet', head: 36000, range_from: 10, range_to: 36000 },
    ]);
  });
});
