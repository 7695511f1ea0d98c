// Another DuckLake writer (a user's DuckDB with the reference `ducklake` extension, ../shared/ducklake-ref/) changes
// the columns of a table chainlake writes, as the spec lets it. A column it adds is followed: chainlake's next commit
// and compact keep its values (a row fetched again too), and write it NULL in the rows they add. A table it renames,
// or a declared column it renames, drops or retypes, is refused before anything is written, with the statement that
// undoes it: chainlake reads and writes its declared columns by name, so following would silently leave the renamed
// column NULL, bring dropped values back, or start an empty table beside the renamed one. A table it drops (expired
// or not), or drops and creates again under its name, voids the ledger's claims: the next run fetches its whole range
// again (test/distributed/shared-lake.test.ts has the distributed lake's).
import { existsSync } from 'node:fs';
import { cp } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeLake } from '../../src/decode/lake.js';
import { resolveDatasets } from '../../src/decode/spec.js';
import { openEngine } from '../../src/load/engine.js';
import { LakePaths } from '../../src/load/paths.js';
import { openLakeReader } from '../../src/load/read/reader.js';
import { compactLake } from '../../src/load/write/maintenance.js';
import { parseJob } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { estimatePlan } from '../../src/pipeline/estimate.js';
import { formatReport } from '../../src/pipeline/report.js';
import { formatPlan } from '../../src/cli/commands/plan.js';
import type { Logger } from '../../src/pipeline/log.js';
import { verifySession } from '../../src/pipeline/verify/session.js';
import { A_ERC20_0 } from '../../src/simulator/chain.js';
import { chainFor, startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { A_SHOWCASE, SHOWCASE_SIGNATURES, showcaseEvents, STANDARD_SIGNATURES } from '../../src/simulator/token-events.js';
import { parseAbiItem, toEventSelector, type AbiEvent } from 'viem';
import { REFERENCE_DIR, withReference } from '../ducklake/helpers.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';
import { onTestHook } from '../../src/load/test-hooks.js';

const HAS_REF = existsSync(path.join(REFERENCE_DIR, 'ducklake.duckdb_extension'));
if (!HAS_REF) console.warn(`shared-schema tests skipped: the reference ducklake extension is not at ${REFERENCE_DIR} (see its README)`);

type Rows = Record<string, unknown>[];
const json = (rows: Rows) => JSON.stringify(rows, (_, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
/** Columns a fetch of the same row again changes (when, by which run, confirmations since). */
const VOLATILE = ['_run_id', '_ingested_at', 'confirmations'];
/** Each row without the volatile columns, by key. */
const byKey = (rows: Rows, key = 'transaction_hash') =>
  new Map(rows.map((r) => [String(r[key]), json([Object.fromEntries(Object.entries(r).filter(([c]) => !VOLATILE.includes(c)))])]));

const withRef = (lake: string, statements: string[], opts: { inlining?: number } = {}): Promise<Rows> =>
  withReference(path.join(lake, 'catalog.duckdb'), statements, { ...opts, as: 'lake' });
const refRows = (lake: string, table = 'transactions') => withRef(lake, [`SELECT * FROM lake.${table} ORDER BY ALL`]);
const snapshotOf = async (lake: string) => Number((await queryCatalog(lake, 'SELECT max(snapshot_id) AS s FROM ducklake_snapshot'))[0]!.s);

async function chainlakeRows(lake: string): Promise<Rows> {
  const reader = await openLakeReader(new LakePaths(lake));
  try {
    return (await reader.conn.runAndReadAll('SELECT * FROM transactions ORDER BY ALL')).getRowObjectsJS() as Rows;
  } finally {
    reader.close();
  }
}

let sim: RunningSimulator;
let dir: string;
let cleanup: () => Promise<void>;
let addresses: string[];

/** The first `count` addresses' transactions; `incremental`, as a nightly job: from the ledger's marks. */
const job = (lake: string, count: number, opts: { incremental?: boolean } = {}) =>
  parseJob(
    {
      name: opts.incremental ? 'nightly' : 'schema',
      target: 'simulator',
      lake,
      concurrency: 4,
      ...(opts.incremental ? { range: { incremental: true } } : {}),
      datasets: { transactions: { addresses: addresses.slice(0, count) } },
    },
    'shared-schema-test',
    process.env,
  );
/** The ledger's marks of transactions: how many, and the highest. */
const marksOf = (lake: string) => queryCatalog(lake, `SELECT count(*) AS n, max(block) AS block FROM watermarks WHERE dataset = 'transactions'`);
/**
 * A copy of `from` at `name`, taken in as a lake of its own: a chainlake reader points the copy's catalog at the
 * copy's files (until then the reference reads and writes the files where the original's catalog says).
 */
async function copyOf(from: string, name: string): Promise<string> {
  const lake = path.join(dir, name);
  await cp(from, lake, { recursive: true });
  (await openLakeReader(new LakePaths(lake))).close();
  return lake;
}
let firstLake: Promise<string> | undefined;
/**
 * A lake of the first address's transactions; the next commit adds the other two's (in the same days). The run is
 * made once for the file, and each test changes a copy of its lake.
 */
async function lakeOf(name: string): Promise<string> {
  const made = await (firstLake ??= (async () => {
    const lake = path.join(dir, 'first');
    expect((await runJob(job(lake, 1), { simulator: sim })).status).toBe('complete');
    return lake;
  })());
  return copyOf(made, name);
}
let nightlyLake: Promise<string> | undefined;
/** The first incremental run's lake of the first two addresses, made once for the file (each test changes a copy). */
const nightlyOf = (): Promise<string> =>
  (nightlyLake ??= (async () => {
    const lake = path.join(dir, 'nightly');
    expect((await runJob(job(lake, 2, { incremental: true }), { simulator: sim })).status).toBe('complete');
    return lake;
  })());

beforeAll(async () => {
  if (!HAS_REF) return;
  sim = await startSimulator({ seed: 5 });
  ({ dir, cleanup } = await tempDir('chainlake-shared-schema-'));
  addresses = sim.examples.addresses.slice(0, 3);
});

afterAll(async () => {
  await sim?.close();
  await cleanup?.();
});

describe.skipIf(!HAS_REF)('another DuckLake writer changes the columns of a table chainlake writes (single machine)', () => {
  it("keeps a column it added: its values survive the next commit (rows fetched again too) and compact; chainlake's new rows read NULL", async () => {
    const lake = await lakeOf('add');
    const [first] = await withRef(lake, ['SELECT transaction_hash, CAST(block_date AS VARCHAR) AS day FROM lake.transactions ORDER BY ALL LIMIT 1']);
    const day = String(first!.day);
    // The column, a value on one of chainlake's rows (an inlined delete and insert), and a row of its own in a file.
    await withRef(lake, [
      'ALTER TABLE lake.transactions ADD COLUMN note VARCHAR',
      `UPDATE lake.transactions SET note = 'checked' WHERE transaction_hash = '${String(first!.transaction_hash)}'`,
    ]);
    await withRef(
      lake,
      [
        `INSERT INTO lake.transactions (transaction_hash, block_number, transaction_index, network, block_date, _run_id, _ingested_at, note)
         VALUES ('0xref-note', 1, 0, 'mainnet', DATE '${day}', 'reference', TIMESTAMPTZ '2026-01-01 00:00:00+00', 'mine')`,
      ],
      { inlining: 0 },
    );
    const before = byKey(await refRows(lake));
    expect(before.get(String(first!.transaction_hash))).toContain('"note":"checked"');

    expect((await runJob(job(lake, 3), { simulator: sim })).status).toBe('complete');
    const rows = await refRows(lake);
    const after = byKey(rows);
    expect(after.size).toBeGreaterThan(before.size);
    // Every row the reference read before, as it was (the row chainlake fetched again keeps its note); the new ones NULL.
    for (const [key, row] of before) expect(after.get(key), key).toBe(row);
    for (const r of rows) if (!before.has(String(r.transaction_hash))) expect(r.note).toBeNull();
    expect(json(await chainlakeRows(lake))).toBe(json(rows));

    // compact rewrites the day of two files (chainlake's and the reference's row's) into one, the notes in it.
    await withRef(
      lake,
      [
        `INSERT INTO lake.transactions (transaction_hash, block_number, transaction_index, network, block_date, _run_id, _ingested_at, note)
         VALUES ('0xref-note-2', 2, 0, 'mainnet', DATE '${day}', 'reference', TIMESTAMPTZ '2026-01-01 00:00:00+00', 'mine too')`,
      ],
      { inlining: 0 },
    );
    const beforeCompact = await refRows(lake);
    expect((await compactLake(new LakePaths(lake))).partitions).toBeGreaterThanOrEqual(1);
    expect(json(await refRows(lake))).toBe(json(beforeCompact));
  });

  const REFUSED: { change: string; statements: string[]; says: RegExp; undo?: RegExp; hint?: RegExp }[] = [
    {
      change: 'a column renamed',
      statements: ['ALTER TABLE lake.transactions RENAME COLUMN nonce TO tx_nonce'],
      says: /column nonce of the lake's table transactions was renamed to tx_nonce by another DuckLake writer \(snapshot \d+\)/,
      undo: /ALTER TABLE "transactions" RENAME COLUMN "tx_nonce" TO "nonce"$/,
    },
    {
      // The name is there, but the field id is another column's: read by name, the renamed values would move into it.
      change: 'a column renamed and its name given to another',
      statements: ['ALTER TABLE lake.transactions RENAME COLUMN nonce TO tx_nonce', 'ALTER TABLE lake.transactions ADD COLUMN nonce BIGINT'],
      says: /column nonce of the lake's table transactions is not the column chainlake wrote: another DuckLake writer renamed that one to tx_nonce \(snapshot \d+\) and gave its name to another column \(field id \d+, where chainlake's is \d+\)/,
      hint: /ALTER TABLE "transactions" RENAME COLUMN "nonce" TO "nonce_added"; ALTER TABLE "transactions" RENAME COLUMN "tx_nonce" TO "nonce"$/,
    },
    {
      change: 'a column dropped',
      statements: ['ALTER TABLE lake.transactions DROP COLUMN tx_message'],
      says: /column tx_message of the lake's table transactions was dropped by another DuckLake writer/,
    },
    {
      change: "a column's type changed",
      statements: ['ALTER TABLE lake.transactions ALTER COLUMN nonce SET DATA TYPE HUGEINT'],
      says: /column nonce of the lake's table transactions was changed from int64 to int128 by another DuckLake writer/,
    },
    {
      change: 'the table renamed',
      statements: ['ALTER TABLE lake.transactions RENAME TO txs'],
      says: /the lake's table transactions was renamed to txs by another DuckLake writer/,
      undo: /ALTER TABLE "txs" RENAME TO "transactions"$/,
    },
  ];

  it.each(REFUSED)('refuses $change before anything is written: the next commit and compact say what changed and how to undo it', async (c) => {
    const lake = await lakeOf(c.change.replace(/\W+/g, '-'));
    await withRef(lake, c.statements);
    const snapshot = await snapshotOf(lake);
    const table = c.change.includes('table renamed') ? 'txs' : 'transactions';
    const before = await refRows(lake, table);

    const error = await runJob(job(lake, 3), { simulator: sim }).then(
      () => undefined,
      (e: unknown) => e as { code?: string; message: string; hint?: string },
    );
    expect(error?.code).toBe('CHAINLAKE_SCHEMA_CHANGED');
    expect(error?.message).toMatch(c.says);
    if (c.undo) expect(error?.hint).toMatch(c.undo);
    if (c.hint) expect(error?.hint).toMatch(c.hint);
    await expect(compactLake(new LakePaths(lake))).rejects.toMatchObject({ code: 'CHAINLAKE_SCHEMA_CHANGED' });
    expect(await snapshotOf(lake)).toBe(snapshot);
    expect(json(await refRows(lake, table))).toBe(json(before));

    // A renamed table's rows are in the renamed table: its claims stand, the commit refuses it (above).
    if (c.change.includes('table renamed')) expect((await estimatePlan(job(lake, 3), { simulator: sim, probe: false })).voided).toEqual([]);
    if (!c.undo) return;
    // The hint's statement undoes the change: the next commit goes through, and every row read before is still
    // there with its values (the renamed column's read by its field id, not lost).
    await withRef(lake, [`USE lake`, error!.hint!.match(/ALTER TABLE .*$/)![0]]);
    expect((await runJob(job(lake, 3), { simulator: sim })).status).toBe('complete');
    const after = byKey(await refRows(lake));
    const renamedBack = byKey(before.map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k === 'tx_nonce' ? 'nonce' : k, v]))));
    expect(after.size).toBeGreaterThan(renamedBack.size);
    for (const [key, row] of renamedBack) expect(after.get(key), key).toBe(row);
  });

  it('follows a type promotion of a declared column (int32 -> int64): the next commit goes through, writes the wider type and keeps the rows', async () => {
    const lake = path.join(dir, 'promoted');
    const configured = showcaseEvents().find((e) => e.name === 'Configured')!;
    const showcase = chainFor(5, 'small', 'mainnet').addrLower(A_SHOWCASE);
    const run = (toBlock: number) =>
      runJob(
        parseJob(
          {
            name: 'promoted',
            target: 'simulator',
            lake,
            range: { fromBlock: 0, toBlock },
            datasets: { event_logs: { contracts: [{ address: showcase, topics: [toEventSelector(configured)] }] } },
            decode: { contracts: [{ address: showcase, name: 'show', signatures: [SHOWCASE_SIGNATURES[0]!] }] },
          },
          'shared-schema-test',
          process.env,
        ),
        { simulator: sim },
      );
    expect((await run(2000)).errors).toEqual([]);
    const rows = async () => (await withRef(lake, ['SELECT * EXCLUDE (_run_id, _ingested_at) FROM lake.show_configured ORDER BY ALL'])).map((r) => json([r]));
    const typeOf = async () =>
      (await queryCatalog(lake, `SELECT column_type FROM ducklake_column WHERE column_name = 'level' AND end_snapshot IS NULL`)).map((r) => r.column_type);
    expect(await typeOf()).toEqual(['int32']);
    await withRef(lake, ['ALTER TABLE lake.show_configured ALTER COLUMN level SET DATA TYPE BIGINT']);
    expect(await typeOf()).toEqual(['int64']);
    const before = await rows();
    expect(before.length).toBeGreaterThan(0);

    const report = await run(4000);
    expect(report.errors).toEqual([]);
    expect(report.decoded?.datasets[0]?.rows).toBeGreaterThan(0);
    const after = await rows();
    expect(after.length).toBeGreaterThan(before.length);
    expect(after).toEqual(expect.arrayContaining(before));
    expect(await typeOf()).toEqual(['int64']);
    // The files the commit wrote carry the column's type (a data file is written in the catalog's column types).
    const written = await withRef(lake, [`SELECT data_file FROM ducklake_list_files('lake', 'show_configured')`]);
    expect(written.length).toBeGreaterThan(0);
    const types = await withRef(lake, [
      `SELECT DISTINCT type FROM parquet_schema([${written.map((f) => `'${String(f.data_file).replace(/'/g, "''")}'`).join(', ')}]) WHERE name = 'level'`,
    ]);
    expect(types).toEqual([{ type: 'INT64' }]);
  });

  // One rule for a table another writer dropped, whether or not it expired the snapshots that knew it: before
  // expiry, the message names the snapshot where the dropped table's rows still read.
  it.each([
    { drop: 'dropped and expired', expire: true },
    { drop: 'dropped (not expired)', expire: false },
  ])("a table $drop by another writer voids the ledger's claims: an incremental run fetches its whole range again, and says so", async ({ expire }) => {
    // The first incremental run, made once for both cases; each drops the table in a copy of its lake.
    const made = await nightlyOf();
    const lake = await copyOf(made, expire ? 'expired' : 'dropped');
    const nightly = job(lake, 2, { incremental: true });
    const before = byKey(await refRows(lake));
    expect(before.size).toBeGreaterThan(0);
    const marks = () => marksOf(lake);
    const [{ block }] = (await marks()) as [{ block: bigint }];
    const readable = await snapshotOf(lake);
    // Expired, the reference's catalog has no row of the table at all: nothing says it was there. Not expired, its
    // ended rows name the drop, and the rows before it still read.
    await withRef(lake, [
      'DROP TABLE lake.transactions',
      ...(expire
        ? ["CALL ducklake_expire_snapshots('lake', older_than => now() + INTERVAL 1 HOUR)", "CALL ducklake_cleanup_old_files('lake', cleanup_all => true)"]
        : []),
    ]);
    const dropped = await snapshotOf(lake);
    const tableRows = await queryCatalog(lake, `SELECT count(*) AS n FROM ducklake_table WHERE table_name = 'transactions' AND end_snapshot IS NULL`);
    expect(tableRows).toEqual([{ n: 0n }]);
    expect(await queryCatalog(lake, `SELECT count(*) AS n FROM ducklake_table WHERE table_name = 'transactions'`)).toEqual([{ n: expire ? 0n : 1n }]);

    const counted = `the ledger counts blocks up to ${block} of 2 scopes on mainnet of transactions as loaded, but `;
    const says = new RegExp(
      expire
        ? `${counted}the lake has no table transactions nor any record of one`
        : `${counted}another DuckLake writer dropped the lake's table transactions \\(snapshot ${dropped}\\): those claims are void, and transactions's whole range is fetched again into a new table; the dropped table's rows stay readable in the snapshots before the drop until they are expired \\(SELECT \\* FROM transactions AT \\(VERSION => ${readable}\\)\\)`,
    );
    // Until a run plans it, the ledger's claims stand: what writes or rewrites the table without planning refuses.
    if (!expire)
      await expect(compactLake(new LakePaths(lake))).rejects.toMatchObject({
        code: 'CHAINLAKE_SCHEMA_CHANGED',
        message: expect.stringMatching(/the lake's table transactions was dropped by another DuckLake writer \(snapshot \d+\) and no run has planned it since/),
      });
    const plan = await estimatePlan(nightly, { simulator: sim, probe: false });
    expect(plan.voided).toEqual([{ dataset: 'transactions', scopes: 2, block: Number(block), windows: 0, ...(expire ? {} : { dropped, readable }) }]);
    expect(plan.windows.length).toBeGreaterThan(0);
    expect(formatPlan(plan)).toMatch(says);

    // A run stopped as it starts (no window committed): its start made the table again, and the void lasts. Without
    // that, the next run would find a table and the old watermarks, and fetch nothing.
    const stop = new AbortController();
    const warnings: string[] = [];
    const logger: Logger = {
      log: (level, event, message) => {
        if (level === 'warn' && event === 'ledger.voided') warnings.push(message);
        if (event === 'run.start') stop.abort();
      },
    };
    const stopped = await runJob(nightly, { simulator: sim, signal: stop.signal, logger });
    expect(stopped.status).toBe('interrupted');
    expect(stopped.voided?.map((v) => v.dataset)).toEqual(['transactions']);
    expect(warnings).toEqual([expect.stringMatching(says)]);
    expect(formatReport(stopped)).toMatch(says);
    expect(await marks()).toEqual([{ n: 0n, block: null }]);
    expect(await refRows(lake)).toEqual([]);

    const report = await runJob(nightly, { simulator: sim });
    expect(report.status).toBe('complete');
    expect(report.voided).toBeUndefined();
    const after = byKey(await refRows(lake));
    expect([...after.keys()].sort()).toEqual([...before.keys()].sort());
    for (const [key, row] of before) expect(after.get(key), key).toBe(row);
    expect(await marks()).toEqual([{ n: 2n, block }]);
    if (expire) return;
    // The time travel the message names reads the dropped table's rows, beside the table made again.
    const old = byKey(await withRef(lake, [`USE lake`, `SELECT * FROM transactions AT (VERSION => ${readable}) ORDER BY ALL`]));
    expect([...old.keys()].sort()).toEqual([...before.keys()].sort());
    for (const [key, row] of before) expect(old.get(key), key).toBe(row);
  });

  it("a table another writer drops and creates again under its name voids the ledger's claims: the next incremental run fetches the whole range again and merges it into the table as it is now (keeping that writer's rows), and says so; later runs do not void again", async () => {
    const made = await nightlyOf();
    const lake = await copyOf(made, 'recreated');
    const nightly = job(lake, 2, { incremental: true });
    const before = byKey(await refRows(lake));
    const [{ block }] = (await marksOf(lake)) as [{ block: bigint }];
    const readable = await snapshotOf(lake);
    // Replaced by a table partitioned as chainlake's, holding the even blocks' rows only and a row of the writer's own
    // (a key no fetch gives).
    await withRef(lake, [
      'CREATE OR REPLACE TABLE lake.transactions AS SELECT * FROM lake.transactions WHERE false',
      'ALTER TABLE lake.transactions SET PARTITIONED BY (network, block_date)',
      `INSERT INTO lake.transactions SELECT * FROM lake.transactions AT (VERSION => ${readable}) WHERE block_number % 2 = 0`,
      `INSERT INTO lake.transactions SELECT * REPLACE ('0xfeed' AS transaction_hash) FROM lake.transactions LIMIT 1`,
    ]);
    const mine = await withRef(lake, [`SELECT * FROM lake.transactions WHERE transaction_hash = '0xfeed'`]);
    expect(mine).toHaveLength(1);
    const kept = byKey(await refRows(lake));
    expect([...before.keys()].filter((k) => !kept.has(k)).length).toBeGreaterThan(0);
    const [{ dropped }] = (await queryCatalog(
      lake,
      `SELECT max(end_snapshot) AS dropped FROM ducklake_table WHERE table_name = 'transactions' AND end_snapshot IS NOT NULL`,
    )) as [{ dropped: bigint }];
    const [{ created }] = (await queryCatalog(
      lake,
      `SELECT min(begin_snapshot) AS created FROM ducklake_table WHERE table_id = (SELECT table_id FROM ducklake_table WHERE table_name = 'transactions' AND end_snapshot IS NULL)`,
    )) as [{ created: bigint }];
    const says = new RegExp(
      `the ledger counts blocks up to ${block} of 2 scopes on mainnet of transactions as loaded, but another DuckLake writer dropped the lake's table transactions \\(snapshot ${dropped}\\) and created another of that name \\(snapshot ${created}\\): those claims are void, and transactions's whole range is fetched again and merged into that table as it is now; the dropped table's rows stay readable in the snapshots before the drop until they are expired \\(SELECT \\* FROM transactions AT \\(VERSION => ${readable}\\)\\)`,
    );
    const plan = await estimatePlan(nightly, { simulator: sim, probe: false });
    expect(plan.voided).toEqual([
      { dataset: 'transactions', scopes: 2, block: Number(block), windows: 0, dropped: Number(dropped), readable, recreated: Number(created) },
    ]);
    expect(formatPlan(plan)).toMatch(says);

    const report = await runJob(nightly, { simulator: sim });
    expect(report.status).toBe('complete');
    expect(formatReport(report)).toMatch(says);
    const after = byKey(await refRows(lake));
    // Every row a clean run loads, each as it loaded it, and the other writer's row kept.
    expect([...after.keys()].sort()).toEqual([...before.keys(), '0xfeed'].sort());
    for (const [key, row] of before) expect(after.get(key), key).toBe(row);
    expect(await marksOf(lake)).toEqual([{ n: 2n, block }]);
    // The claims are now on the table as it is: the next run voids nothing and fetches nothing already loaded.
    const next = await runJob(nightly, { simulator: sim });
    expect(next.status).toBe('complete');
    expect(next.voided).toBeUndefined();
    expect(byKey(await refRows(lake))).toEqual(after);
  });

  it('a table another writer drops and creates again while a run fetches is refused at the commit, nothing written; the next run voids the claims and fetches it whole into the new table', async () => {
    const lake = await lakeOf('late-recreate');
    const before = byKey(await refRows(lake));
    const marked = await marksOf(lake);
    let recreated: number | undefined;
    onTestHook(async (step) => {
      if (step !== 'stage-write' || recreated !== undefined) return;
      await withRef(lake, [
        'CREATE OR REPLACE TABLE lake.transactions AS SELECT * FROM lake.transactions WHERE false',
        'ALTER TABLE lake.transactions SET PARTITIONED BY (network, block_date)',
      ]);
      recreated = await snapshotOf(lake);
    });
    const error = await runJob(job(lake, 3), { simulator: sim }).then(
      () => undefined,
      (e: unknown) => e as { code?: string; message: string },
    );
    onTestHook();
    expect(recreated).toBeDefined();
    expect(error?.code).toBe('CHAINLAKE_SCHEMA_CHANGED');
    expect(error?.message).toMatch(
      /the lake's table transactions was dropped by another DuckLake writer \(snapshot \d+\) and another created under its name \(snapshot \d+\) after this run was planned/,
    );
    // Nothing written: no snapshot after the re-creation, the new table empty, the marks as they were.
    expect(await snapshotOf(lake)).toBe(recreated);
    expect(await refRows(lake)).toEqual([]);
    expect(await marksOf(lake)).toEqual(marked);

    const report = await runJob(job(lake, 3), { simulator: sim });
    expect(report.status).toBe('complete');
    expect(report.voided?.map((v) => v.dataset)).toEqual(['transactions']);
    const after = byKey(await refRows(lake));
    expect(after.size).toBeGreaterThan(before.size);
    for (const [key, row] of before) expect(after.get(key), key).toBe(row);
  });

  it('a table created again unpartitioned (CREATE OR REPLACE TABLE … AS SELECT) is refused before any request, naming the table, the snapshots and the statements that make it mergeable; after them the run loads into it', async () => {
    const lake = await lakeOf('ctas');
    const before = byKey(await refRows(lake));
    await withRef(lake, ['CREATE OR REPLACE TABLE lake.transactions AS SELECT * FROM lake.transactions']);
    const at = await snapshotOf(lake);
    const error = await runJob(job(lake, 1), { simulator: sim }).then(
      () => undefined,
      (e: unknown) => e as { code?: string; message: string; hint?: string },
    );
    expect(error?.code).toBe('CHAINLAKE_SCHEMA_CHANGED');
    expect(error?.message).toMatch(
      new RegExp(
        `the lake's table transactions was created again by another DuckLake writer \\(snapshot ${at}, after the drop at snapshot ${at}\\) partitioned by nothing`,
      ),
    );
    // Refused at the run's start: no request sent, nothing recorded of the run, the marks kept.
    expect(await snapshotOf(lake)).toBe(at);
    expect(await queryCatalog(lake, `SELECT count(*) AS n FROM runs`)).toEqual([{ n: 1n }]);
    expect((await marksOf(lake))[0]).toMatchObject({ n: 1n });
    const statements = error!.hint!.replace(/^.*\(USE <lake>\): /, '').split('; ');
    expect(statements).toHaveLength(5);
    await withRef(lake, ['USE lake', ...statements]);
    const report = await runJob(job(lake, 1), { simulator: sim });
    expect(report.status).toBe('complete');
    expect(report.voided?.map((v) => v.dataset)).toEqual(['transactions']);
    const after = byKey(await refRows(lake));
    expect([...after.keys()].sort()).toEqual([...before.keys()].sort());
    for (const [key, row] of before) expect(after.get(key), key).toBe(row);
  });

  it('a table created again with a declared column of another type is refused before any request, naming the table, the column, the snapshots and the statements that make it again with the declared types; after them the run loads into it', async () => {
    const lake = await lakeOf('retyped-again');
    const before = byKey(await refRows(lake));
    await withRef(lake, [
      'CREATE OR REPLACE TABLE lake.transactions AS SELECT * REPLACE (CAST(nonce AS VARCHAR) AS nonce) FROM lake.transactions WHERE false',
      'ALTER TABLE lake.transactions SET PARTITIONED BY (network, block_date)',
    ]);
    const at = await snapshotOf(lake);
    const error = await runJob(job(lake, 1), { simulator: sim }).then(
      () => undefined,
      (e: unknown) => e as { code?: string; message: string; hint?: string },
    );
    expect(error?.code).toBe('CHAINLAKE_SCHEMA_CHANGED');
    expect(error?.message).toMatch(
      new RegExp(
        `the lake's table transactions was created again by another DuckLake writer \\(snapshot ${at - 1}, after the drop at snapshot ${at - 1}\\) with nonce as varchar \\(chainlake declares BIGINT\\)`,
      ),
    );
    expect(await snapshotOf(lake)).toBe(at);
    expect(await queryCatalog(lake, `SELECT count(*) AS n FROM runs`)).toEqual([{ n: 1n }]);
    const statements = error!.hint!.replace(/^.*\(USE <lake>\): /, '').split('; ');
    expect(statements).toHaveLength(5);
    await withRef(lake, ['USE lake', ...statements]);
    expect((await runJob(job(lake, 1), { simulator: sim })).status).toBe('complete');
    const after = byKey(await refRows(lake));
    expect([...after.keys()].sort()).toEqual([...before.keys()].sort());
    for (const [key, row] of before) expect(after.get(key), key).toBe(row);
  });

  it('a table another writer drops while a run fetches is refused at the commit, nothing written; the next run voids the claims and fetches it whole', async () => {
    const lake = await lakeOf('late-drop');
    const before = byKey(await refRows(lake));
    const marks = () => marksOf(lake);
    const marked = await marks();
    let dropped: number | undefined;
    // Planned and started with the table there; dropped by the reference while the run stages its first window.
    onTestHook(async (step) => {
      if (step !== 'stage-write' || dropped !== undefined) return;
      await withRef(lake, ['DROP TABLE lake.transactions']);
      dropped = await snapshotOf(lake);
    });
    const error = await runJob(job(lake, 3), { simulator: sim }).then(
      () => undefined,
      (e: unknown) => e as { code?: string; message: string },
    );
    onTestHook();
    expect(dropped).toBeDefined();
    expect(error?.code).toBe('CHAINLAKE_SCHEMA_CHANGED');
    expect(error?.message).toMatch(/the lake's table transactions was dropped by another DuckLake writer \(snapshot \d+\) and no run has planned it since/);
    // Nothing written: no snapshot after the drop, no table made again, the marks as they were.
    expect(await snapshotOf(lake)).toBe(dropped);
    expect(await queryCatalog(lake, `SELECT count(*) AS n FROM ducklake_table WHERE table_name = 'transactions' AND end_snapshot IS NULL`)).toEqual([
      { n: 0n },
    ]);
    expect(await marks()).toEqual(marked);

    const report = await runJob(job(lake, 3), { simulator: sim });
    expect(report.status).toBe('complete');
    expect(report.voided?.map((v) => v.dataset)).toEqual(['transactions']);
    const after = byKey(await refRows(lake));
    expect(after.size).toBeGreaterThan(before.size);
    for (const [key, row] of before) expect(after.get(key), key).toBe(row);
  });

  it("a snapshot dataset's table (no watermark) dropped between two commits of a run is refused, as a marked one is: the run's committed windows are its claims", async () => {
    const lake = path.join(dir, 'snapshot-drop');
    // The first run commits each window on its own (the drop comes between two of its commits).
    const doc = (commit: { commit?: { everyRows: number } }) => ({
      name: 'holdings',
      target: 'simulator',
      lake,
      concurrency: 1,
      ...commit,
      datasets: { token_holdings: { addresses } },
    });
    let commits = 0;
    let dropped: number | undefined;
    // The reference drops the table once the run's first commit is in, as its second is prepared.
    onTestHook(async (step) => {
      if (step !== 'prepared' || ++commits !== 2) return;
      await withRef(lake, ['DROP TABLE lake.token_holdings']);
      dropped = await snapshotOf(lake);
    });
    const error = await runJob(parseJob(doc({ commit: { everyRows: 1 } }), 'shared-schema-test', process.env), { simulator: sim }).then(
      () => undefined,
      (e: unknown) => e as { code?: string; message: string },
    );
    onTestHook();
    expect(dropped).toBeDefined();
    expect(await queryCatalog(lake, `SELECT count(*) AS n FROM watermarks WHERE dataset = 'token_holdings'`)).toEqual([{ n: 0n }]);
    expect(error?.code).toBe('CHAINLAKE_SCHEMA_CHANGED');
    expect(error?.message).toMatch(/the lake's table token_holdings was dropped by another DuckLake writer \(snapshot \d+\) and no run has planned it since/);
    expect(await snapshotOf(lake)).toBe(dropped);
    // The next run plans it as on an empty lake (a snapshot dataset is fetched whole): the rows the first commit wrote
    // into the dropped table are in the table made again.
    const pairs = async (at = '') =>
      (await withRef(lake, ['USE lake', `SELECT DISTINCT holder_address, token_address FROM token_holdings${at} ORDER BY ALL`])).map((r) => json([r]));
    const committed = await pairs(` AT (VERSION => ${dropped! - 1})`);
    expect(committed.length).toBeGreaterThan(0);
    // (Its commits as a job's are by default: how they are cut is not what it shows.)
    expect((await runJob(parseJob(doc({}), 'shared-schema-test', process.env), { simulator: sim })).status).toBe('complete');
    expect(await pairs()).toEqual(expect.arrayContaining(committed));
  });

  it("a table another writer emptied (DELETE without WHERE) is not voided: its rows are its writer's to delete; `verify` finds them gone and `--repair` fetches them again", async () => {
    const lake = path.join(dir, 'emptied');
    const nightly = job(lake, 1, { incremental: true });
    expect((await runJob(nightly, { simulator: sim })).status).toBe('complete');
    const before = byKey(await refRows(lake));
    await withRef(lake, ['DELETE FROM lake.transactions']);
    const report = await runJob(nightly, { simulator: sim });
    expect(report.voided).toBeUndefined();
    expect(await refRows(lake)).toEqual([]);

    const verified = await verifySession(nightly, { kind: 'local', lake }, {}, { simulator: sim, repair: true });
    expect(verified.beforeRepair?.holds).toBe(false);
    expect(verified.beforeRepair?.differing.length).toBeGreaterThan(0);
    expect(verified.holds).toBe(true);
    const after = byKey(await refRows(lake));
    expect([...after.keys()].sort()).toEqual([...before.keys()].sort());
    for (const [key, row] of before) expect(after.get(key), key).toBe(row);
  });

  it("a decoded table another writer drops: the run's commit refuses, nothing written; `chainlake decode` makes it again from every log. A dropped `_rejects` is made again, empty, and said", async () => {
    const lake = path.join(dir, 'derived');
    const token = chainFor(5, 'small', 'mainnet').addrLower(A_ERC20_0);
    const transfers = { address: token, topics: [toEventSelector(parseAbiItem(STANDARD_SIGNATURES.erc20Transfer) as AbiEvent)] };
    const run = (toBlock: number, log?: Logger) => {
      const doc = {
        name: 'derived',
        target: 'simulator',
        lake,
        range: { fromBlock: 0, toBlock },
        datasets: { event_logs: { contracts: [transfers] } },
        decode: { standard: ['erc20'] },
      };
      return runJob(parseJob(doc, 'shared-schema-test', process.env), { simulator: sim, ...(log ? { logger: log } : {}) });
    };
    expect((await run(3000)).errors).toEqual([]);
    const table = String(
      (await queryCatalog(lake, `SELECT table_name FROM ducklake_table WHERE table_name LIKE 'erc20%' AND end_snapshot IS NULL`))[0]!.table_name,
    );
    const decoded = (): Promise<Rows> => withRef(lake, [`SELECT * EXCLUDE (_run_id, _ingested_at) FROM lake.${table} ORDER BY ALL`]);
    const before = await decoded();
    expect(before.length).toBeGreaterThan(0);
    await withRef(lake, [`DROP TABLE lake.${table}`]);
    const dropped = await snapshotOf(lake);

    // Its commit would decode only its own logs into a table made again: refused, saying how to decode it whole.
    const error = await run(6000).then(
      () => undefined,
      (e: unknown) => e as { code?: string; message: string; hint?: string },
    );
    expect(error?.code).toBe('CHAINLAKE_SCHEMA_CHANGED');
    expect(error?.message).toBe(
      `the lake's table ${table}, derived from the lake's other tables, was dropped by another DuckLake writer (snapshot ${dropped}): a commit would create it again holding only the rows it derives now, without every row derived before`,
    );
    expect(error?.hint).toMatch(/`chainlake decode <job>`/);
    expect(await snapshotOf(lake)).toBe(dropped);

    const paths = new LakePaths(lake);
    const staging = paths.staging('decode-dropped');
    const engine = await openEngine({ tempDir: path.join(staging, 'tmp') });
    try {
      const datasets = await resolveDatasets({ standard: ['erc20'], contracts: [] }, { engine, paths, network: 'mainnet' });
      await decodeLake({ engine, paths, network: 'mainnet', datasets, runId: 'decode-dropped', ingestedAt: new Date().toISOString(), stagingDir: staging });
    } finally {
      engine.close();
    }
    expect(json(await decoded())).toBe(json(before));

    // `_rejects` dropped: the next run makes it again, empty, and its log, report and plan say so.
    await withRef(lake, ['DROP TABLE lake._rejects']);
    const rejectsDropped = await snapshotOf(lake);
    const says = `another DuckLake writer dropped the lake's table _rejects (snapshot ${rejectsDropped}): chainlake creates it again, empty`;
    const seen: string[] = [];
    const report = await run(6000, { log: (_level, event, message) => void seen.push(`${event}: ${message}`) });
    expect(report.errors).toEqual([]);
    expect(report.voided).toEqual([{ dataset: '_rejects', scopes: 0, block: null, windows: 0, dropped: rejectsDropped, readable: rejectsDropped - 1 }]);
    expect(seen.filter((l) => l.startsWith('ledger.voided'))).toEqual([expect.stringContaining(says)]);
    expect(await queryCatalog(lake, `SELECT count(*) AS n FROM ducklake_table WHERE table_name = '_rejects' AND end_snapshot IS NULL`)).toEqual([{ n: 1n }]);
    const decodedAfter = await decoded();
    expect(decodedAfter.length).toBeGreaterThan(before.length);
  });

  it('decoding keeps a column another writer added to a decoded table, and refuses logs whose column it renamed, before writing anything', async () => {
    const lake = path.join(dir, 'logs');
    const token = chainFor(5, 'small', 'mainnet').addrLower(A_ERC20_0);
    const transfers = { address: token, topics: [toEventSelector(parseAbiItem(STANDARD_SIGNATURES.erc20Transfer) as AbiEvent)] };
    // The logs of blocks up to `toBlock`, decoded in the run's commit.
    const run = async (toBlock: number) => {
      const doc = {
        name: 'logs',
        target: 'simulator',
        lake,
        range: { fromBlock: 0, toBlock },
        datasets: { event_logs: { contracts: [transfers] } },
        decode: { standard: ['erc20'] },
      };
      expect((await runJob(parseJob(doc, 'shared-schema-test', process.env), { simulator: sim })).errors).toEqual([]);
    };
    await run(3000);
    const table = String(
      (await queryCatalog(lake, `SELECT table_name FROM ducklake_table WHERE table_name LIKE 'erc20%' AND end_snapshot IS NULL`))[0]!.table_name,
    );
    const decoded = (): Promise<Rows> => withRef(lake, [`SELECT * EXCLUDE (_run_id, _ingested_at) FROM lake.${table} ORDER BY ALL`]);
    // A note on the last decoded row: the next run's blocks start in its day, which the run's decoding rewrites.
    await withRef(lake, [
      `ALTER TABLE lake.${table} ADD COLUMN note VARCHAR`,
      `UPDATE lake.${table} SET note = 'checked' WHERE (transaction_hash, log_index) = (SELECT (transaction_hash, log_index) FROM lake.${table} ORDER BY "timestamp" DESC, log_index DESC LIMIT 1)`,
    ]);
    const before = await decoded();
    await run(6000);
    const rows = await decoded();
    expect(rows.length).toBeGreaterThan(before.length);
    const after = new Set(rows.map((r) => json([r])));
    for (const row of before) expect(after.has(json([row])), json([row])).toBe(true);
    expect(rows.filter((r) => r.note === 'checked')).toHaveLength(1);

    // `chainlake decode` (every log decoded again) refuses logs whose column another writer renamed.
    await withRef(lake, ['ALTER TABLE lake.event_logs RENAME COLUMN address TO emitter']);
    const snapshot = await snapshotOf(lake);
    const paths = new LakePaths(lake);
    const staging = paths.staging('decode-schema');
    const engine = await openEngine({ tempDir: path.join(staging, 'tmp') });
    try {
      const datasets = await resolveDatasets({ standard: ['erc20'], contracts: [] }, { engine, paths, network: 'mainnet' });
      const decoding = decodeLake({
        engine,
        paths,
        network: 'mainnet',
        datasets,
        runId: 'decode-schema',
        ingestedAt: new Date().toISOString(),
        stagingDir: staging,
      });
      await expect(decoding).rejects.toMatchObject({
        code: 'CHAINLAKE_SCHEMA_CHANGED',
        message: expect.stringMatching(/column address of the lake's table event_logs was renamed to emitter/),
      });
    } finally {
      engine.close();
    }
    expect(await snapshotOf(lake)).toBe(snapshot);
  });
});
