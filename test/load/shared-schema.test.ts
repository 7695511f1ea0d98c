// Another DuckLake writer (a user's DuckDB with the reference `ducklake` extension, ../shared/ducklake-ref/) changes
// the columns of a table chainlake writes, as the spec lets it. A column it adds is followed: chainlake's next commit
// and compact keep its values (a row fetched again too), and write it NULL in the rows they add. A table it renames,
// or a declared column it renames, drops or retypes, is refused before anything is written, with the statement that
// undoes it: chainlake reads and writes its declared columns by name, so following would silently leave the renamed
// column NULL, bring dropped values back, or start an empty table beside the renamed one. A table it drops (or drops
// and creates again) while a run fetches is refused at that run's commit; one it creates again unpartitioned is
// refused before any request. Each test changes a copy of one lake (the first address's
// transactions). test/load/shared-schema-drops.test.ts has tables dropped or emptied between runs and decoded
// tables; test/distributed/shared-lake.test.ts the distributed lake's.
import { describe, expect, it } from 'vitest';
import { LakePaths } from '../../src/load/paths.js';
import { compactLake } from '../../src/load/write/maintenance.js';
import { runJob } from '../../src/pipeline/run.js';
import { estimatePlan } from '../../src/pipeline/estimate.js';
import { onTestHook } from '../../src/load/test-hooks.js';
import { REFERENCE_DIR } from '../ducklake/helpers.js';
import { queryCatalog } from '../helpers/lake.js';
import { byKey, chainlakeRows, HAS_REF, json, marksOf, refRows, sharedSchemaLakes, snapshotOf, withRef } from './shared-schema-fixture.js';

if (!HAS_REF) console.warn(`shared-schema tests skipped: the reference ducklake extension is not at ${REFERENCE_DIR} (see its README)`);

const lakes = sharedSchemaLakes();
const job = lakes.job;
/**
 * A lake of the first address's transactions; the next commit adds the other two's (in the same days). The run is
 * made once for the file, and each test changes a copy of its lake.
 */
const lakeOf = (name: string) =>
  lakes.copyOfBuilt('first', async (lake) => expect((await runJob(job(lake, 1), { simulator: lakes.sim })).status).toBe('complete'), name);

type Refusal = { code?: string; message: string; hint?: string } | undefined;

/** The error a run of the first `count` addresses into `lake` ends with (undefined: it completed). */
const refusal = (lake: string, count: number): Promise<Refusal> =>
  runJob(job(lake, count), { simulator: lakes.sim }).then(
    () => undefined,
    (e: unknown) => e as NonNullable<Refusal>,
  );

/**
 * A run of three addresses planned and started with the lake as it is, `statements` run by the reference while it
 * stages its first window: the error it ends with, and the snapshot the change made.
 */
async function changedWhileStaging(lake: string, statements: string[]): Promise<{ error: Refusal; at: number | undefined }> {
  let at: number | undefined;
  onTestHook(async (step) => {
    if (step !== 'stage-write' || at !== undefined) return;
    await withRef(lake, statements);
    at = await snapshotOf(lake);
  });
  try {
    return { error: await refusal(lake, 3), at };
  } finally {
    onTestHook();
  }
}

/**
 * The five statements a refusal's hint gives (after "(USE <lake>): "), run by the reference; then the first address's
 * run, which completes and leaves every row `before` had, each as it was.
 */
async function fixedByHint(lake: string, error: Refusal, before: Map<string, string>) {
  const statements = error!.hint!.replace(/^.*\(USE <lake>\): /, '').split('; ');
  expect(statements).toHaveLength(5);
  await withRef(lake, ['USE lake', ...statements]);
  const report = await runJob(job(lake, 1), { simulator: lakes.sim });
  expect(report.status).toBe('complete');
  const after = byKey(await refRows(lake));
  expect([...after.keys()].sort()).toEqual([...before.keys()].sort());
  for (const [key, row] of before) expect(after.get(key), key).toBe(row);
  return report;
}

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

    expect((await runJob(job(lake, 3), { simulator: lakes.sim })).status).toBe('complete');
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

    const error = await refusal(lake, 3);
    expect(error?.code).toBe('CHAINLAKE_SCHEMA_CHANGED');
    expect(error?.message).toMatch(c.says);
    if (c.undo) expect(error?.hint).toMatch(c.undo);
    if (c.hint) expect(error?.hint).toMatch(c.hint);
    await expect(compactLake(new LakePaths(lake))).rejects.toMatchObject({ code: 'CHAINLAKE_SCHEMA_CHANGED' });
    expect(await snapshotOf(lake)).toBe(snapshot);
    expect(json(await refRows(lake, table))).toBe(json(before));

    // A renamed table's rows are in the renamed table: its claims stand, the commit refuses it (above).
    if (c.change.includes('table renamed')) expect((await estimatePlan(job(lake, 3), { simulator: lakes.sim, probe: false })).voided).toEqual([]);
    if (!c.undo) return;
    // The hint's statement undoes the change: the next commit goes through, and every row read before is still
    // there with its values (the renamed column's read by its field id, not lost).
    await withRef(lake, [`USE lake`, error!.hint!.match(/ALTER TABLE .*$/)![0]]);
    expect((await runJob(job(lake, 3), { simulator: lakes.sim })).status).toBe('complete');
    const after = byKey(await refRows(lake));
    const renamedBack = byKey(before.map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k === 'tx_nonce' ? 'nonce' : k, v]))));
    expect(after.size).toBeGreaterThan(renamedBack.size);
    for (const [key, row] of renamedBack) expect(after.get(key), key).toBe(row);
  });

  it('a table another writer drops and creates again while a run fetches is refused at the commit, nothing written; the next run voids the claims and fetches it whole into the new table', async () => {
    const lake = await lakeOf('late-recreate');
    const before = byKey(await refRows(lake));
    const marked = await marksOf(lake);
    const { error, at: recreated } = await changedWhileStaging(lake, [
      'CREATE OR REPLACE TABLE lake.transactions AS SELECT * FROM lake.transactions WHERE false',
      'ALTER TABLE lake.transactions SET PARTITIONED BY (network, block_date)',
    ]);
    expect(recreated).toBeDefined();
    expect(error?.code).toBe('CHAINLAKE_SCHEMA_CHANGED');
    expect(error?.message).toMatch(
      /the lake's table transactions was dropped by another DuckLake writer \(snapshot \d+\) and another created under its name \(snapshot \d+\) after this run was planned/,
    );
    // Nothing written: no snapshot after the re-creation, the new table empty, the marks as they were.
    expect(await snapshotOf(lake)).toBe(recreated);
    expect(await refRows(lake)).toEqual([]);
    expect(await marksOf(lake)).toEqual(marked);

    const report = await runJob(job(lake, 3), { simulator: lakes.sim });
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
    const error = await refusal(lake, 1);
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
    const report = await fixedByHint(lake, error, before);
    expect(report.voided?.map((v) => v.dataset)).toEqual(['transactions']);
  });

  it('a table created again with a declared column of another type is refused before any request, naming the table, the column, the snapshots and the statements that make it again with the declared types; after them the run loads into it', async () => {
    const lake = await lakeOf('retyped-again');
    const before = byKey(await refRows(lake));
    await withRef(lake, [
      'CREATE OR REPLACE TABLE lake.transactions AS SELECT * REPLACE (CAST(nonce AS VARCHAR) AS nonce) FROM lake.transactions WHERE false',
      'ALTER TABLE lake.transactions SET PARTITIONED BY (network, block_date)',
    ]);
    const at = await snapshotOf(lake);
    const error = await refusal(lake, 1);
    expect(error?.code).toBe('CHAINLAKE_SCHEMA_CHANGED');
    expect(error?.message).toMatch(
      new RegExp(
        `the lake's table transactions was created again by another DuckLake writer \\(snapshot ${at - 1}, after the drop at snapshot ${at - 1}\\) with nonce as varchar \\(chainlake declares BIGINT\\)`,
      ),
    );
    expect(await snapshotOf(lake)).toBe(at);
    expect(await queryCatalog(lake, `SELECT count(*) AS n FROM runs`)).toEqual([{ n: 1n }]);
    await fixedByHint(lake, error, before);
  });

  it('a table another writer drops while a run fetches is refused at the commit, nothing written; the next run voids the claims and fetches it whole', async () => {
    const lake = await lakeOf('late-drop');
    const before = byKey(await refRows(lake));
    const marks = () => marksOf(lake);
    const marked = await marks();
    // Planned and started with the table there; dropped by the reference while the run stages its first window.
    const { error, at: dropped } = await changedWhileStaging(lake, ['DROP TABLE lake.transactions']);
    expect(dropped).toBeDefined();
    expect(error?.code).toBe('CHAINLAKE_SCHEMA_CHANGED');
    expect(error?.message).toMatch(/the lake's table transactions was dropped by another DuckLake writer \(snapshot \d+\) and no run has planned it since/);
    // Nothing written: no snapshot after the drop, no table made again, the marks as they were.
    expect(await snapshotOf(lake)).toBe(dropped);
    expect(await queryCatalog(lake, `SELECT count(*) AS n FROM ducklake_table WHERE table_name = 'transactions' AND end_snapshot IS NULL`)).toEqual([
      { n: 0n },
    ]);
    expect(await marks()).toEqual(marked);

    const report = await runJob(job(lake, 3), { simulator: lakes.sim });
    expect(report.status).toBe('complete');
    expect(report.voided?.map((v) => v.dataset)).toEqual(['transactions']);
    const after = byKey(await refRows(lake));
    expect(after.size).toBeGreaterThan(before.size);
    for (const [key, row] of before) expect(after.get(key), key).toBe(row);
  });
});
