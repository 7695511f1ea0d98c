import { existsSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { DuckDbCatalog, type CatalogDb } from '../../src/ducklake/catalog-db.js';
import { PostgresCatalog } from '../../src/ducklake/postgres-catalog.js';
import { initialiseCatalog } from '../../src/ducklake/ddl.js';
import { currentSnapshot, findTable, listColumns, listSnapshots, planScan, type AsOf } from '../../src/ducklake/reader.js';
import { compareStat, copyTableFile, measureTableFiles, writeDataFile } from '../../src/ducklake/data-file.js';
import { commitFiles, createTable, expireSnapshots, filesToDelete, forgetDeletedFiles, type StagedFile } from '../../src/ducklake/writer.js';
import { refreshViews } from '../../src/ducklake/views.js';
import { changesSince, LakeChangedError } from '../../src/ducklake/conflicts.js';
import { openCatalogFile, tempDir } from './helpers.js';
import { startPostgres, type TestPostgres } from './postgres.js';

const COLUMNS = [
  { name: 'block_date', type: 'DATE' },
  { name: 'block_number', type: 'BIGINT' },
  { name: 'tx_hash', type: 'VARCHAR' },
  { name: 'value', type: 'DECIMAL(38,0)' },
  { name: 'ts', type: 'TIMESTAMP WITH TIME ZONE' },
  { name: 'ok', type: 'BOOLEAN' },
];

/** Seeded rows of one day: block numbers [from, to), a tag that tells versions of the same day apart. */
const daySql = (day: string, from: number, to: number, tag = 'v1') => `
  SELECT DATE '${day}' AS block_date, range AS block_number, '${tag}-' || range AS tx_hash,
         CAST(range AS DECIMAL(38,0)) * 1000000000000000000 AS value,
         TIMESTAMPTZ '${day} 00:00:00+00' + to_seconds(range) AS ts, range % 3 = 0 AS ok
  FROM range(${from}, ${to})`;

interface Lake {
  catalog: CatalogDb;
  /** Another catalog connection, as another process would have. */
  otherCatalog(): Promise<CatalogDb>;
  /** The DuckDB connection that writes and reads the Parquet files. */
  duck: DuckDBConnection;
  otherDuck(): Promise<DuckDBConnection>;
  close(): Promise<void>;
}

let postgres: TestPostgres | undefined;
const BACKENDS: { name: string; open(dir: string): Promise<Lake> }[] = [
  {
    name: 'DuckDB-file catalog',
    async open(dir) {
      const cat = await openCatalogFile(path.join(dir, 'catalog.duckdb'));
      return {
        catalog: cat.catalog,
        otherCatalog: async () => new DuckDbCatalog(await cat.connect()),
        duck: await cat.connect(),
        otherDuck: () => cat.connect(),
        close: async () => cat.close(),
      };
    },
  },
  {
    name: 'PostgreSQL catalog',
    async open() {
      postgres ??= await startPostgres();
      const database = await postgres.database();
      const instance = await DuckDBInstance.create(':memory:');
      const duck = await instance.connect();
      await duck.run("SET TimeZone = 'UTC'");
      const conns = [duck];
      return {
        catalog: new PostgresCatalog(await database.connect()),
        otherCatalog: async () => new PostgresCatalog(await database.connect()),
        duck,
        otherDuck: async () => {
          const c = await instance.connect();
          conns.push(c);
          return c;
        },
        close: async () => {
          for (const c of conns) c.closeSync();
          instance.closeSync();
        },
      };
    },
  },
];

afterAll(async () => {
  await postgres?.stop();
});

describe.each(BACKENDS)('DuckLake writer on a $name', (backend) => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let lake: Lake;
  let duck: DuckDBConnection;
  let dataPath: string;

  beforeEach(async () => {
    ({ dir, cleanup } = await tempDir());
    dataPath = path.join(dir, 'lake') + '/';
    lake = await backend.open(dir);
    duck = lake.duck;
    await initialiseCatalog(lake.catalog, { dataPath });
  });
  afterEach(async () => {
    await lake?.close();
    await cleanup?.();
  });

  async function target(table = 'transfers') {
    const snap = await currentSnapshot(lake.catalog);
    const t = await findTable(lake.catalog, snap.snapshotId, table);
    return { dataPath, table: t, columns: await listColumns(lake.catalog, t.tableId, snap.snapshotId) };
  }
  async function writeDay(day: string, from: number, to: number, tag = 'v1'): Promise<StagedFile> {
    const f = await writeDataFile(duck, await target(), daySql(day, from, to, tag), { block_date: day });
    expect(f).not.toBeNull();
    return f!;
  }
  /** What a reader sees: row count, sum of block numbers and a digest of every row, on any connection. */
  async function read(conn: DuckDBConnection, catalog = lake.catalog, asOf?: AsOf) {
    const scan = await planScan(catalog, 'transfers', { asOf });
    return { snapshot: scan.snapshot.snapshotId, ...(await digest(conn, scan.sql)) };
  }
  async function digest(conn: DuckDBConnection, sql: string) {
    const rows = (
      await conn.runAndReadAll(
        `SELECT count(*)::INTEGER AS n, coalesce(sum(block_number), 0)::BIGINT::VARCHAR AS s,
                md5(coalesce(string_agg(block_date || '|' || block_number || '|' || tx_hash || '|' || value || '|' || ts || '|' || ok, ',' ORDER BY block_date, block_number), '')) AS h
         FROM (${sql})`,
      )
    ).getRowObjectsJS();
    return rows[0] as { n: number; s: string; h: string };
  }
  const expected = (sql: string) => digest(duck, sql);

  it('creates a partitioned table with the catalog rows the spec and the reference extension write', async () => {
    const created = await createTable(lake.catalog, { name: 'transfers', columns: COLUMNS, partitionBy: ['block_date'] });
    expect(created).toMatchObject({ snapshotId: 1, tableId: 1, attempts: 1 });
    const q = (sql: string) => lake.catalog.query(sql);
    expect(await q('SELECT snapshot_id, schema_version, next_catalog_id, next_file_id FROM ducklake_snapshot ORDER BY 1')).toEqual([
      { snapshot_id: 0, schema_version: 0, next_catalog_id: 1, next_file_id: 0 },
      { snapshot_id: 1, schema_version: 1, next_catalog_id: 3, next_file_id: 0 },
    ]);
    expect(await q('SELECT changes_made FROM ducklake_snapshot_changes WHERE snapshot_id = 1')).toEqual([{ changes_made: 'created_table:"main"."transfers"' }]);
    expect(await q('SELECT table_id, begin_snapshot, end_snapshot, schema_id, table_name, path, path_is_relative FROM ducklake_table')).toEqual([
      { table_id: 1, begin_snapshot: 1, end_snapshot: null, schema_id: 0, table_name: 'transfers', path: 'transfers/', path_is_relative: true },
    ]);
    expect(
      await q(
        'SELECT column_id, column_order, column_name, column_type, initial_default, default_value, nulls_allowed, parent_column, default_value_type, default_value_dialect FROM ducklake_column ORDER BY column_id',
      ),
    ).toEqual(
      [
        [1, 'block_date', 'date'],
        [2, 'block_number', 'int64'],
        [3, 'tx_hash', 'varchar'],
        [4, 'value', 'decimal(38,0)'],
        [5, 'ts', 'timestamptz'],
        [6, 'ok', 'boolean'],
      ].map(([id, name, type]) => ({
        column_id: id,
        column_order: id,
        column_name: name,
        column_type: type,
        initial_default: null,
        default_value: 'NULL',
        nulls_allowed: true,
        parent_column: null,
        default_value_type: 'literal',
        default_value_dialect: 'duckdb',
      })),
    );
    expect(await q('SELECT * FROM ducklake_schema_versions')).toEqual([{ begin_snapshot: 1, schema_version: 1, table_id: 1 }]);
    expect(await q('SELECT * FROM ducklake_partition_info')).toEqual([{ partition_id: 2, table_id: 1, begin_snapshot: 1, end_snapshot: null }]);
    expect(await q('SELECT * FROM ducklake_partition_column')).toEqual([
      { partition_id: 2, table_id: 1, partition_key_index: 0, column_id: 1, transform: 'identity' },
    ]);
    await expect(createTable(lake.catalog, { name: 'transfers', columns: COLUMNS })).rejects.toThrow(/already exists/);
    // An empty table reads as no rows with the right column types.
    const scan = await planScan(lake.catalog, 'transfers');
    const empty = await duck.runAndReadAll(scan.sql);
    expect(empty.columnNames()).toEqual(COLUMNS.map((c) => c.name));
    expect(empty.columnTypes().map(String)).toEqual(['DATE', 'BIGINT', 'VARCHAR', 'DECIMAL(38,0)', 'TIMESTAMP WITH TIME ZONE', 'BOOLEAN']);
    expect(empty.currentRowCount).toBe(0);
  });

  it('writes, replaces a partition in one snapshot, reads back at each snapshot, expires and lists the files to delete', async () => {
    await createTable(lake.catalog, { name: 'transfers', columns: COLUMNS, partitionBy: ['block_date'] });
    const d1 = await writeDay('2024-01-01', 0, 100);
    const d2 = await writeDay('2024-01-02', 100, 250);
    expect(d1.path).toMatch(/^block_date=2024-01-01\/ducklake-[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\.parquet$/);
    // Staged files are invisible until committed.
    expect((await read(duck)).n).toBe(0);
    const s2 = await commitFiles(lake.catalog, { tableName: 'transfers', files: [d1, d2], author: 'test', message: 'two days' });
    expect(s2).toMatchObject({ snapshotId: 2, attempts: 1, endedFiles: 0 });

    const q = (sql: string, params?: (string | number)[]) => lake.catalog.query(sql, params);
    expect(await q('SELECT * FROM ducklake_snapshot_changes WHERE snapshot_id = 2')).toEqual([
      { snapshot_id: 2, changes_made: 'inserted_into_table:1', author: 'test', commit_message: 'two days', commit_extra_info: null },
    ]);
    expect(
      await q(
        'SELECT data_file_id, begin_snapshot, end_snapshot, path, path_is_relative, file_format, record_count, row_id_start, partition_id FROM ducklake_data_file ORDER BY 1',
      ),
    ).toEqual([
      {
        data_file_id: 0,
        begin_snapshot: 2,
        end_snapshot: null,
        path: d1.path,
        path_is_relative: true,
        file_format: 'parquet',
        record_count: 100,
        row_id_start: 0,
        partition_id: 2,
      },
      {
        data_file_id: 1,
        begin_snapshot: 2,
        end_snapshot: null,
        path: d2.path,
        path_is_relative: true,
        file_format: 'parquet',
        record_count: 150,
        row_id_start: 100,
        partition_id: 2,
      },
    ]);
    expect(await q('SELECT * FROM ducklake_file_partition_value ORDER BY 1')).toEqual([
      { data_file_id: 0, table_id: 1, partition_key_index: 0, partition_value: '2024-01-01' },
      { data_file_id: 1, table_id: 1, partition_key_index: 0, partition_value: '2024-01-02' },
    ]);
    // File statistics as the spec encodes them (strings; booleans 0/1), checked against the file on disk.
    const stats = await q(
      'SELECT column_id, value_count, null_count, min_value, max_value FROM ducklake_file_column_stats WHERE data_file_id = 0 ORDER BY column_id',
    );
    expect(stats.map((r) => [r.column_id, r.value_count, r.null_count, r.min_value, r.max_value])).toEqual([
      [1, 100, 0, '2024-01-01', '2024-01-01'],
      [2, 100, 0, '0', '99'],
      [3, 100, 0, 'v1-0', 'v1-99'],
      [4, 100, 0, '0', '99000000000000000000'],
      [5, 100, 0, '2024-01-01 00:00:00+00', '2024-01-01 00:01:39+00'],
      [6, 100, 0, '0', '1'],
    ]);
    const [size] = (await duck.runAndReadAll(`SELECT size FROM read_blob('${d1.fullPath}')`)).getRowObjectsJS();
    expect((await q('SELECT file_size_bytes FROM ducklake_data_file WHERE data_file_id = 0'))[0]!.file_size_bytes).toBe(Number(size!.size));
    // footer_size: the Thrift metadata length, the 4-byte little-endian field before the trailing PAR1.
    const bytes = await readFile(d1.fullPath);
    expect(bytes.subarray(-4).toString()).toBe('PAR1');
    expect((await q('SELECT footer_size FROM ducklake_data_file WHERE data_file_id = 0'))[0]!.footer_size).toBe(bytes.readInt32LE(bytes.length - 8));
    // Table statistics: numeric min/max compared as numbers ('99' < '249'), exact record count.
    expect(await q('SELECT record_count, next_row_id FROM ducklake_table_stats')).toEqual([{ record_count: 250, next_row_id: 250 }]);
    expect(await q('SELECT min_value, max_value, contains_null FROM ducklake_table_column_stats WHERE column_id = 2')).toEqual([
      { min_value: '0', max_value: '249', contains_null: false },
    ]);

    const v2 = await read(duck);
    expect(v2).toEqual({ snapshot: 2, ...(await expected(`${daySql('2024-01-01', 0, 100)} UNION ALL ${daySql('2024-01-02', 100, 250)}`)) });
    expect(v2.n).toBe(250);

    // Replace day 1 with 40 new rows: one snapshot, old file ended (not deleted), new file added.
    const d1b = await writeDay('2024-01-01', 1000, 1040, 'v2');
    const s3 = await commitFiles(lake.catalog, { tableName: 'transfers', files: [d1b], replacePartitions: [['2024-01-01']] });
    expect(s3).toMatchObject({ snapshotId: 3, endedFiles: 1 });
    expect(await q('SELECT changes_made FROM ducklake_snapshot_changes WHERE snapshot_id = 3')).toEqual([
      { changes_made: 'inserted_into_table:1,deleted_from_table:1' },
    ]);
    expect(await q('SELECT data_file_id, begin_snapshot, end_snapshot, row_id_start FROM ducklake_data_file ORDER BY 1')).toEqual([
      { data_file_id: 0, begin_snapshot: 2, end_snapshot: 3, row_id_start: 0 },
      { data_file_id: 1, begin_snapshot: 2, end_snapshot: null, row_id_start: 100 },
      { data_file_id: 2, begin_snapshot: 3, end_snapshot: null, row_id_start: 250 },
    ]);
    expect(await q('SELECT record_count, next_row_id FROM ducklake_table_stats')).toEqual([{ record_count: 190, next_row_id: 290 }]);
    const v3 = await read(duck);
    expect(v3).toEqual({ snapshot: 3, ...(await expected(`${daySql('2024-01-01', 1000, 1040, 'v2')} UNION ALL ${daySql('2024-01-02', 100, 250)}`)) });
    // Time travel: snapshot 2 by id and by time still reads the old day 1; snapshot 1 reads nothing.
    expect(await read(duck, lake.catalog, { snapshot: 2 })).toEqual(v2);
    const snaps = await listSnapshots(lake.catalog);
    expect(snaps.map((s) => s.snapshotId)).toEqual([0, 1, 2, 3]);
    expect((await read(duck, lake.catalog, { snapshot: 1 })).n).toBe(0);

    // Rows outside the partition they are written for are refused, and their file removed.
    await expect(writeDataFile(duck, await target(), daySql('2024-01-03', 0, 5), { block_date: '2024-01-02' })).rejects.toThrow(
      /partition block_date=2024-01-02 hold block_date values from 2024-01-03/,
    );
    // A query with no rows writes no file.
    expect(await writeDataFile(duck, await target(), `${daySql('2024-01-05', 0, 0)}`, { block_date: '2024-01-05' })).toBeNull();
    // Files measured together (a commit's partitions): one holding another partition's rows fails them all, and
    // every one of them is removed, not only the one at fault.
    const batch = [
      (await copyTableFile(duck, await target(), daySql('2024-01-06', 0, 5), { block_date: '2024-01-06' }))!,
      (await copyTableFile(duck, await target(), daySql('2024-01-08', 0, 5), { block_date: '2024-01-07' }))!,
      (await copyTableFile(duck, await target(), daySql('2024-01-09', 0, 5), { block_date: '2024-01-09' }))!,
    ];
    for (const f of batch) expect(existsSync(f.fullPath), f.path).toBe(true);
    await expect(measureTableFiles(duck, batch)).rejects.toThrow(/partition block_date=2024-01-07 hold block_date values from 2024-01-08 to 2024-01-08/);
    for (const f of batch) expect(existsSync(f.fullPath), f.path).toBe(false);

    // Expire every snapshot but the newest: the ended day-1 file is needed by none and is scheduled for deletion.
    expect(await expireSnapshots(lake.catalog, { olderThan: new Date(Date.now() - 3_600_000) })).toEqual({ expired: [], scheduledFiles: 0 });
    const expiry = await expireSnapshots(lake.catalog, { olderThan: new Date(Date.now() + 3_600_000) });
    expect(expiry).toEqual({ expired: [0, 1, 2], scheduledFiles: 1 });
    expect((await listSnapshots(lake.catalog)).map((s) => s.snapshotId)).toEqual([3]);
    await expect(planScan(lake.catalog, 'transfers', { asOf: { snapshot: 2 } })).rejects.toThrow(/snapshot 2 does not exist/);
    expect(await q('SELECT data_file_id FROM ducklake_data_file ORDER BY 1')).toEqual([{ data_file_id: 1 }, { data_file_id: 2 }]);
    expect(await q('SELECT count(*) AS n FROM ducklake_file_column_stats WHERE data_file_id = 0')).toEqual([{ n: 0 }]);
    const doomed = await filesToDelete(lake.catalog);
    expect(doomed.map((f) => [f.dataFileId, f.storedPath, f.pathIsRelative, f.path])).toEqual([[0, `main/transfers/${d1.path}`, true, d1.fullPath]]);
    expect(existsSync(d1.fullPath)).toBe(true);
    expect(await filesToDelete(lake.catalog, { olderThan: new Date(Date.now() - 3_600_000) })).toEqual([]);
    for (const f of doomed) await rm(f.path);
    await forgetDeletedFiles(lake.catalog, doomed);
    expect(await filesToDelete(lake.catalog)).toEqual([]);
    // The newest snapshot is untouched by expiry and cleanup.
    expect(await read(duck)).toEqual(v3);
    expect(await expireSnapshots(lake.catalog, { keepLast: 1 })).toEqual({ expired: [], scheduledFiles: 0 });
  });

  it('a reader sees one whole snapshot or the next while a replacement commits', async () => {
    await createTable(lake.catalog, { name: 'transfers', columns: COLUMNS, partitionBy: ['block_date'] });
    await commitFiles(lake.catalog, { tableName: 'transfers', files: [await writeDay('2024-01-01', 0, 100), await writeDay('2024-01-02', 100, 200)] });
    // A second connection and catalog handle: the reader, as another process would be.
    const readerConn = await lake.otherDuck();
    const reader = await lake.otherCatalog();
    let state = await read(readerConn, reader);
    for (let round = 1; round <= 3; round++) {
      const day = round % 2 ? '2024-01-01' : '2024-01-02';
      const from = 10_000 * round;
      const staged = await writeDay(day, from, from + 20 + round, `r${round}`);
      const before = state;
      // Planned before the commit, executed after it: still the old snapshot, whole (files are never rewritten).
      const planned = await planScan(reader, 'transfers');
      let during: Awaited<ReturnType<typeof read>> | undefined;
      const result = await commitFiles(lake.catalog, {
        tableName: 'transfers',
        files: [staged],
        replacePartitions: [[day]],
        beforeCommit: async () => {
          during = await read(readerConn, reader); // everything written, not yet committed
        },
      });
      expect(during).toEqual(before);
      expect(await digest(readerConn, planned.sql)).toEqual({ n: before.n, s: before.s, h: before.h });
      state = await read(readerConn, reader);
      expect(state.snapshot).toBe(result.snapshotId);
      expect(state.snapshot).toBe(before.snapshot + 1);
      expect(state.h).not.toBe(before.h);
      // Exactly the new partition plus the untouched one: never a mix of old and new files of the same day.
      const now = (
        await readerConn.runAndReadAll(
          `SELECT count(DISTINCT split_part(tx_hash, '-', 1))::INTEGER AS versions FROM (${(await planScan(reader, 'transfers')).sql}) WHERE block_date = DATE '${day}'`,
        )
      ).getRowObjectsJS();
      expect(now).toEqual([{ versions: 1 }]);
    }
    expect(state).toEqual({
      snapshot: 5,
      ...(await expected(`${daySql('2024-01-01', 30_000, 30_023, 'r3')} UNION ALL ${daySql('2024-01-02', 20_000, 20_022, 'r2')}`)),
    });
  });

  it('two committers racing for the same snapshot: the loser retries on the new state, last writer wins whole', async () => {
    await createTable(lake.catalog, { name: 'transfers', columns: COLUMNS, partitionBy: ['block_date'] });
    await commitFiles(lake.catalog, { tableName: 'transfers', files: [await writeDay('2024-01-01', 0, 100)] });
    const a = await writeDay('2024-01-01', 100, 110, 'a');
    const b = await writeDay('2024-01-01', 200, 230, 'b');
    const other = await lake.otherCatalog();
    let bResult: Awaited<ReturnType<typeof commitFiles>> | undefined;
    const aResult = await commitFiles(lake.catalog, {
      tableName: 'transfers',
      files: [a],
      replacePartitions: [['2024-01-01']],
      // After A read snapshot 2, B commits snapshot 3 replacing the same partition (once).
      afterSnapshotRead: async () => {
        bResult ??= await commitFiles(other, { tableName: 'transfers', files: [b], replacePartitions: [['2024-01-01']] });
      },
    });
    expect(bResult).toMatchObject({ snapshotId: 3, attempts: 1, endedFiles: 1 });
    expect(aResult).toMatchObject({ snapshotId: 4, attempts: 2, endedFiles: 1 });
    expect(await lake.catalog.query('SELECT data_file_id, begin_snapshot, end_snapshot FROM ducklake_data_file ORDER BY 1')).toEqual([
      { data_file_id: 0, begin_snapshot: 2, end_snapshot: 3 },
      { data_file_id: 1, begin_snapshot: 3, end_snapshot: 4 },
      { data_file_id: 2, begin_snapshot: 4, end_snapshot: null },
    ]);
    expect(await read(duck)).toEqual({ snapshot: 4, ...(await expected(daySql('2024-01-01', 100, 110, 'a'))) });
    expect(await read(duck, lake.catalog, { snapshot: 3 })).toEqual({ snapshot: 3, ...(await expected(daySql('2024-01-01', 200, 230, 'b'))) });
  });

  it("a commit that read its table at a snapshot refuses another writer's later change to that table (LakeChangedError), not one to another table", async () => {
    await createTable(lake.catalog, { name: 'transfers', columns: COLUMNS, partitionBy: ['block_date'] });
    await createTable(lake.catalog, { name: 'other', columns: COLUMNS, partitionBy: ['block_date'] });
    await commitFiles(lake.catalog, { tableName: 'transfers', files: [await writeDay('2024-01-01', 0, 100)] });
    const other = await lake.otherCatalog();
    const otherFile = async (day: string) => (await writeDataFile(duck, await target('other'), daySql(day, 0, 5), { block_date: day }))!;
    // Read at 3; another writer commits to another table (4): the replacement commits.
    const replace = async (readAt: number, tag: string) =>
      commitFiles(lake.catalog, { tableName: 'transfers', files: [await writeDay('2024-01-01', 100, 110, tag)], replacePartitions: [['2024-01-01']], readAt });
    await commitFiles(other, { tableName: 'other', files: [await otherFile('2024-01-01')] });
    expect(await replace(3, 'a')).toMatchObject({ snapshotId: 5 });
    // Read at 5; another writer appends to transfers (6): refused, nothing committed, its rows current.
    await commitFiles(other, { tableName: 'transfers', files: [await writeDay('2024-01-02', 0, 10, 'b')] });
    const refused = await replace(5, 'c').catch((e: unknown) => e as LakeChangedError);
    expect(refused).toBeInstanceOf(LakeChangedError);
    expect(refused).toMatchObject({ code: 'CHAINLAKE_LAKE_CHANGED', readAt: 5, later: [{ snapshotId: 6, tableIds: [1], changes: 'inserted_into_table:1' }] });
    expect((refused as LakeChangedError).message).toContain('another DuckLake writer committed to transfers (snapshot 6');
    expect((await currentSnapshot(lake.catalog)).snapshotId).toBe(6);
    // A snapshot expired since the read leaves what it changed unknown: it counts as a change.
    await commitFiles(other, { tableName: 'other', files: [await otherFile('2024-01-02')] });
    expect(await changesSince(lake.catalog, 6, [1])).toEqual([]);
    await expireSnapshots(lake.catalog, { ids: [6] });
    expect(await changesSince(lake.catalog, 5, [1])).toMatchObject([{ snapshotId: 7, tableIds: [1], changes: 'snapshots 6 to 7 expired or unrecorded since' }]);
  });

  it("commits the caller's own writes with the snapshot, and a failure in them commits nothing", async () => {
    await createTable(lake.catalog, { name: 'transfers', columns: COLUMNS, partitionBy: ['block_date'] });
    await lake.catalog.query('CREATE TABLE chainlake_watermark (dataset VARCHAR PRIMARY KEY, block BIGINT, snapshot_id BIGINT)');
    await lake.catalog.query(`INSERT INTO chainlake_watermark VALUES ('transfers', 0, 1)`);
    const advance = (block: number) => async (tx: CatalogDb, snapshotId: number) => {
      await tx.query(`UPDATE chainlake_watermark SET block = $1, snapshot_id = $2 WHERE dataset = 'transfers'`, [block, snapshotId]);
    };
    const ok = await commitFiles(lake.catalog, { tableName: 'transfers', files: [await writeDay('2024-01-01', 0, 100)], inTransaction: advance(99) });
    expect(await lake.catalog.query('SELECT block, snapshot_id FROM chainlake_watermark')).toEqual([{ block: 99, snapshot_id: ok.snapshotId }]);

    const staged = await writeDay('2024-01-02', 100, 200);
    await expect(
      commitFiles(lake.catalog, {
        tableName: 'transfers',
        files: [staged],
        inTransaction: async (tx, id) => {
          await advance(199)(tx, id);
          throw new Error('window bookkeeping failed');
        },
      }),
    ).rejects.toThrow(/window bookkeeping failed/);
    // Nothing of the failed commit is visible: no snapshot, no file row, the watermark where it was.
    expect((await currentSnapshot(lake.catalog)).snapshotId).toBe(ok.snapshotId);
    expect(await lake.catalog.query('SELECT count(*) AS n FROM ducklake_data_file')).toEqual([{ n: 1 }]);
    expect(await lake.catalog.query('SELECT block, snapshot_id FROM chainlake_watermark')).toEqual([{ block: 99, snapshot_id: ok.snapshotId }]);
    expect((await read(duck)).n).toBe(100);
    // The staged file is still valid: committing it again works (immutable name, never reused).
    const again = await commitFiles(lake.catalog, { tableName: 'transfers', files: [staged], inTransaction: advance(199) });
    expect(again.snapshotId).toBe(ok.snapshotId + 1);
    expect((await read(duck)).n).toBe(200);
    // Committing the same staged file again (a committer that lost the answer to its COMMIT) adds nothing.
    await expect(commitFiles(lake.catalog, { tableName: 'transfers', files: [staged] })).rejects.toThrow(/already committed/);
    expect((await read(duck)).n).toBe(200);
    // No file and nothing replaced: no snapshot, but the caller's writes commit against the newest one.
    const idle = await commitFiles(lake.catalog, { tableName: 'transfers', files: [], inTransaction: advance(250) });
    expect(idle).toMatchObject({ snapshotId: again.snapshotId, endedFiles: 0 });
    expect((await currentSnapshot(lake.catalog)).snapshotId).toBe(again.snapshotId);
    expect(await lake.catalog.query('SELECT block, snapshot_id FROM chainlake_watermark')).toEqual([{ block: 250, snapshot_id: again.snapshotId }]);
  });

  it('three committers on their own connections at once: contiguous snapshots, each holding one whole version per partition', async () => {
    await createTable(lake.catalog, { name: 'transfers', columns: COLUMNS, partitionBy: ['block_date'] });
    const days = ['2024-01-01', '2024-01-02', '2024-01-03'];
    // Seeded plan: committer c replaces day (c + j) % 3 with version c<c>j<j> of 10 + 3c + j rows, j = 0..1.
    const plans: { day: string; tag: string; rows: number; file: StagedFile }[][] = [];
    for (let c = 0; c < 3; c++) {
      const jobs = [];
      for (let j = 0; j < 2; j++) {
        const day = days[(c + j) % 3]!;
        const rows = 10 + 3 * c + j;
        const tag = `c${c}j${j}`;
        jobs.push({ day, tag, rows, file: await writeDay(day, 1000 * c + 100 * j, 1000 * c + 100 * j + rows, tag) });
      }
      plans.push(jobs);
    }
    const results = await Promise.all(
      plans.map(async (jobs, c) => {
        const db = c === 0 ? lake.catalog : await lake.otherCatalog();
        const done = [];
        for (const job of jobs)
          done.push({ ...job, ...(await commitFiles(db, { tableName: 'transfers', files: [job.file], replacePartitions: [[job.day]] })) });
        return done;
      }),
    );
    const commits = results.flat().sort((a, b) => a.snapshotId - b.snapshotId);
    // Every commit got its own snapshot, none lost, none doubled: 2..7 without a gap.
    expect(commits.map((c) => c.snapshotId)).toEqual(Array.from({ length: 6 }, (_, i) => i + 2));
    expect((await listSnapshots(lake.catalog)).map((s) => s.snapshotId)).toEqual(Array.from({ length: 8 }, (_, i) => i));
    // Replaying the commits in snapshot order gives, at every snapshot, exactly what a reader reads there.
    const model = new Map<string, { tag: string; rows: number }>();
    for (const commit of commits) {
      model.set(commit.day, { tag: commit.tag, rows: commit.rows });
      const scan = await planScan(lake.catalog, 'transfers', { asOf: { snapshot: commit.snapshotId } });
      const seen = (
        await duck.runAndReadAll(
          `SELECT block_date::VARCHAR AS day, min(split_part(tx_hash, '-', 1)) AS tag, count(DISTINCT split_part(tx_hash, '-', 1))::INTEGER AS versions, count(*)::INTEGER AS n
           FROM (${scan.sql}) GROUP BY 1 ORDER BY 1`,
        )
      ).getRowObjectsJS();
      expect(seen, `snapshot ${commit.snapshotId}`).toEqual([...model].sort().map(([day, v]) => ({ day, tag: v.tag, versions: 1, n: v.rows })));
    }
  });

  it('writes and reads list columns (nested column rows, field ids, leaf statistics); a column holding NaN has unknown bounds and NaN flag', async () => {
    await createTable(lake.catalog, {
      name: 'logs',
      columns: [
        { name: 'id', type: 'BIGINT' },
        { name: 'topics', type: 'INTEGER[]' },
        { name: 'score', type: 'DOUBLE' },
      ],
    });
    expect(await lake.catalog.query('SELECT column_id, column_order, column_name, column_type, parent_column FROM ducklake_column ORDER BY column_id')).toEqual(
      [
        { column_id: 1, column_order: 1, column_name: 'id', column_type: 'int64', parent_column: null },
        { column_id: 2, column_order: 2, column_name: 'topics', column_type: 'list', parent_column: null },
        { column_id: 3, column_order: 3, column_name: 'element', column_type: 'int32', parent_column: 2 },
        { column_id: 4, column_order: 4, column_name: 'score', column_type: 'float64', parent_column: null },
      ],
    );
    const t = await target('logs');
    const source = `SELECT range AS id, CASE WHEN range = 3 THEN NULL ELSE [range::INT, 40 + range::INT] END AS topics,
                      CASE WHEN range = 2 THEN 'nan'::DOUBLE ELSE range / 2 END AS score FROM range(5)`;
    const f = (await writeDataFile(duck, t, source))!;
    const ids = (
      await duck.runAndReadAll(`SELECT name, field_id::INTEGER AS f FROM parquet_schema('${f.fullPath}') WHERE field_id IS NOT NULL ORDER BY f`)
    ).getRowObjectsJS();
    expect(ids).toEqual([
      { name: 'id', f: 1 },
      { name: 'topics', f: 2 },
      { name: 'element', f: 3 },
      { name: 'score', f: 4 },
    ]);
    await commitFiles(lake.catalog, { tableName: 'logs', files: [f] });
    const stats = await lake.catalog.query(
      'SELECT column_id, min_value, max_value, null_count, contains_nan FROM ducklake_file_column_stats ORDER BY column_id',
    );
    expect(stats).toEqual([
      { column_id: 1, min_value: '0', max_value: '4', null_count: 0, contains_nan: null },
      { column_id: 3, min_value: '0', max_value: '44', null_count: 1, contains_nan: null },
      // Statistics come from the footer, which keeps no NaN flag, and DuckDB writes no bounds for a chunk with a
      // NaN: unknown (NULL) is what a reader must not prune on.
      { column_id: 4, min_value: null, max_value: null, null_count: 0, contains_nan: null },
    ]);
    expect(await lake.catalog.query('SELECT column_id, contains_nan, min_value FROM ducklake_table_column_stats ORDER BY column_id')).toEqual([
      { column_id: 1, contains_nan: null, min_value: '0' },
      { column_id: 3, contains_nan: null, min_value: '0' },
      { column_id: 4, contains_nan: null, min_value: null },
    ]);
    const scan = await planScan(lake.catalog, 'logs');
    expect(scan.columns.map((c) => [c.name, c.type, c.children.map((k) => `${k.name}:${k.type}`)])).toEqual([
      ['id', 'int64', []],
      ['topics', 'list', ['element:int32']],
      ['score', 'float64', []],
    ]);
    const rows = (await duck.runAndReadAll(`SELECT id::INTEGER AS id, topics, isnan(score) AS nan FROM (${scan.sql}) ORDER BY id`)).getRowObjectsJS();
    expect(rows.map((r) => [r.id, r.topics === null ? null : ((r.topics as { items?: unknown[] }).items ?? r.topics), r.nan])).toEqual([
      [0, [0, 40], false],
      [1, [1, 41], false],
      [2, [2, 42], true],
      [3, null, false],
      [4, [4, 44], false],
    ]);
  });
});

it('compares statistics of numeric types as numbers and of other types as text', () => {
  expect(compareStat('int64', '99', '249')).toBeLessThan(0);
  expect(compareStat('int64', '-5', '3')).toBeLessThan(0);
  expect(compareStat('int64', '-50', '-6')).toBeLessThan(0);
  expect(compareStat('decimal(38,0)', '99000000000000000000', '100000000000000000000')).toBeLessThan(0);
  expect(compareStat('decimal(10,2)', '1.50', '1.5')).toBe(0);
  expect(compareStat('float64', '-inf', '-1e300')).toBeLessThan(0);
  expect(compareStat('date', '2024-01-02', '2024-01-10')).toBeLessThan(0);
  expect(compareStat('varchar', 'b', 'a')).toBeGreaterThan(0);
});

describe('DuckLake views over the current snapshot (DuckDB-file catalog)', () => {
  it('plain DuckDB opening catalog.duckdb reads each table of the newest snapshot through its view', async () => {
    const { dir, cleanup } = await tempDir();
    try {
      const file = path.join(dir, 'catalog.duckdb');
      const dataPath = path.join(dir, 'lake') + '/';
      const cat = await openCatalogFile(file);
      const duck = await cat.connect();
      await initialiseCatalog(cat.catalog, { dataPath });
      await createTable(cat.catalog, { name: 'transfers', columns: COLUMNS, partitionBy: ['block_date'] });
      const snap = await currentSnapshot(cat.catalog);
      const table = await findTable(cat.catalog, snap.snapshotId, 'transfers');
      const target = { dataPath, table, columns: await listColumns(cat.catalog, table.tableId, snap.snapshotId) };
      const views = (tx: CatalogDb) => refreshViews(tx, dataPath).then(() => undefined);
      const day1 = (await writeDataFile(duck, target, daySql('2024-01-01', 0, 100), { block_date: '2024-01-01' }))!;
      await commitFiles(cat.catalog, { tableName: 'transfers', files: [day1], inTransaction: views });
      const day1b = (await writeDataFile(duck, target, daySql('2024-01-01', 500, 530, 'v2'), { block_date: '2024-01-01' }))!;
      // While the replacement is written but not committed, the view (on another connection) shows the old snapshot.
      const other = await cat.connect();
      let during: unknown;
      await commitFiles(cat.catalog, {
        tableName: 'transfers',
        files: [day1b],
        replacePartitions: [['2024-01-01']],
        inTransaction: views,
        beforeCommit: async () => {
          during = (await other.runAndReadAll('SELECT count(*)::INTEGER AS n FROM transfers')).getRowObjectsJS();
        },
      });
      expect(during).toEqual([{ n: 100 }]);
      cat.close();
      // As a user would: `duckdb catalog.duckdb`, read-only, no extension, no chainlake.
      const instance = await DuckDBInstance.create(file, { access_mode: 'READ_ONLY' });
      const conn = await instance.connect();
      try {
        const rows = (await conn.runAndReadAll(`SELECT count(*)::INTEGER AS n, min(tx_hash) AS first FROM transfers`)).getRowObjectsJS();
        expect(rows).toEqual([{ n: 30, first: 'v2-500' }]);
      } finally {
        conn.closeSync();
        instance.closeSync();
      }
    } finally {
      await cleanup();
    }
  });
});
