import { readdirSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  currentSnapshot,
  findTable,
  listColumns,
  listDataFiles,
  listSnapshots,
  listTables,
  planScan,
  resolveSnapshot,
  scanSql,
} from '../../src/ducklake/reader.js';
import { initialiseCatalog } from '../../src/ducklake/ddl.js';
import { catalogFiles } from '../../src/ducklake/files.js';
import { writeDataFile } from '../../src/ducklake/data-file.js';
import { commitFiles, createTable } from '../../src/ducklake/writer.js';
import { FIXTURES, gunzipFixture, migrateToV10, openCatalogFile, tempDir, type OpenCatalog } from './helpers.js';

describe('DuckLake reader on the reference extension catalogs', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  const opened: OpenCatalog[] = [];

  /** A fixture's catalog, migrated, in `into` (a catalog another test of this file opened stays as it is). */
  async function fixture(rel: string, into = dir): Promise<OpenCatalog> {
    const file = await gunzipFixture(rel, into);
    const cat = await openCatalogFile(file);
    opened.push(cat);
    await migrateToV10(cat.conn);
    return cat;
  }

  beforeAll(async () => {
    ({ dir, cleanup } = await tempDir());
  });
  afterAll(async () => {
    for (const c of opened) c.close();
    await cleanup?.();
  });

  it('reads delete_ignore_extra_columns: 91 rows at the newest snapshot (positional deletes, extra column ignored), 100 at snapshot 1', async () => {
    const cat = await fixture('iceberg_deletes/delete_ignore_extra_columns.db.gz');
    const dataPath = path.join(FIXTURES, 'iceberg_deletes', 'delete_ignore_extra_columns');
    const scan = await planScan(cat.catalog, 'test', { dataPath });
    expect(scan.snapshot.snapshotId).toBe(2);
    expect(scan.columns.map((c) => [c.columnId, c.name, c.type])).toEqual([[1, 'id', 'int64']]);
    expect(scan.files).toHaveLength(1);
    expect(scan.files[0]!.path).toBe(path.join(dataPath, 'main', 'test', 'ducklake-01995275-3c88-7aa3-b5a9-9e6279d52d97.parquet'));
    expect(scan.files[0]!.deleteFile).toMatchObject({ format: 'parquet', deleteCount: 9 });
    const latest = (
      await cat.conn.runAndReadAll(`SELECT count(*)::INTEGER AS n, sum(id)::INTEGER AS s, max(id)::INTEGER AS hi FROM (${scan.sql})`)
    ).getRowObjectsJS();
    expect(latest).toEqual([{ n: 91, s: 4095, hi: 90 }]);

    const before = await planScan(cat.catalog, 'test', { dataPath, asOf: { snapshot: 1 } });
    expect(before.files[0]!.deleteFile).toBeNull();
    const rows = (await cat.conn.runAndReadAll(`SELECT count(*)::INTEGER AS n, sum(id)::INTEGER AS s FROM (${before.sql})`)).getRowObjectsJS();
    expect(rows).toEqual([{ n: 100, s: 4950 }]);

    // As of a time: snapshot 1's commit time reads snapshot 1, a time before snapshot 0 reads nothing.
    const snaps = await listSnapshots(cat.catalog);
    expect(snaps.map((s) => [s.snapshotId, s.changes])).toEqual([
      [0, 'created_schema:"main"'],
      [1, 'created_table:"main"."test",inserted_into_table:1'],
      [2, 'deleted_from_table:1'],
    ]);
    // Date has millisecond precision, snapshot_time microseconds: one ms after snapshot 1 (and before 2) reads 1.
    const justAfter1 = new Date(snaps[1]!.snapshotTime.getTime() + 1);
    expect(justAfter1.getTime()).toBeLessThan(snaps[2]!.snapshotTime.getTime());
    expect((await resolveSnapshot(cat.catalog, { time: justAfter1 })).snapshotId).toBe(1);
    expect((await resolveSnapshot(cat.catalog, { time: new Date(snaps[2]!.snapshotTime.getTime() + 1) })).snapshotId).toBe(2);
    await expect(resolveSnapshot(cat.catalog, { time: new Date(snaps[0]!.snapshotTime.getTime() - 60_000) })).rejects.toThrow(/no snapshot.*at or before/);
    await expect(resolveSnapshot(cat.catalog, { snapshot: 7 })).rejects.toThrow(/snapshot 7 does not exist/);
  });

  it("names delete_ignore_extra_columns' data file and the delete file of it, at their places: every file of its folder (none is an orphan)", async () => {
    const cat = await fixture('iceberg_deletes/delete_ignore_extra_columns.db.gz', await mkdtemp(path.join(dir, 'files-')));
    const folder = path.join(FIXTURES, 'iceberg_deletes', 'delete_ignore_extra_columns', 'main', 'test');
    const files = await catalogFiles(cat.catalog, path.join(FIXTURES, 'iceberg_deletes', 'delete_ignore_extra_columns'));
    const both = { table: 'test', endSnapshot: null, partition: [] };
    expect(files).toEqual([
      {
        ...both,
        kind: 'data',
        dataFileId: 0,
        location: path.join(folder, 'ducklake-01995275-3c88-7aa3-b5a9-9e6279d52d97.parquet'),
        rows: 100,
        beginSnapshot: 1,
      },
      {
        ...both,
        kind: 'delete',
        dataFileId: 0,
        location: path.join(folder, 'ducklake-01995275-4693-7c2b-bde2-2a1abf7df260-delete.parquet'),
        rows: 9,
        beginSnapshot: 2,
      },
    ]);
    expect(files.map((f) => f.location).sort()).toEqual(
      readdirSync(folder)
        .map((f) => path.join(folder, f))
        .sort(),
    );
  });

  it('lists schemas, tables and columns at the newest and at earlier snapshots (v04-dev1_types, 1.0 layout)', async () => {
    const cat = await fixture('old_ducklake/v04-dev1_types.db.gz');
    expect((await currentSnapshot(cat.catalog)).snapshotId).toBe(5);
    const names = async (s: number) => (await listTables(cat.catalog, s)).map((t) => `${t.schema.name}.${t.name}`);
    expect(await names(5)).toEqual(['main.test', 'main.variant_tbl', 'main.geo_tbl']);
    expect(await names(3)).toEqual(['main.test', 'main.variant_tbl']);
    expect(await names(0)).toEqual([]);
    const geo = await findTable(cat.catalog, 5, 'geo_tbl');
    expect(geo).toMatchObject({ tableId: 3, path: 'geo_tbl/', pathIsRelative: true, schema: { name: 'main', path: 'main/' } });
    const types = async (table: string) =>
      (await listColumns(cat.catalog, (await findTable(cat.catalog, 5, table)).tableId, 5)).map((c) => `${c.name}:${c.type}`);
    expect(await types('test')).toEqual(['i:int32']);
    expect(await types('variant_tbl')).toEqual(['v:variant']);
    expect(await types('geo_tbl')).toEqual(['g:geometry']);
    // Files exist from the snapshot that inserted them on; geometry stats stay in extra_stats, not min/max.
    expect(await listDataFiles(cat.catalog, geo, 4, '/lake/')).toEqual([]);
    const [file] = await listDataFiles(cat.catalog, geo, 5, '/lake/');
    expect(file).toMatchObject({
      dataFileId: 1,
      recordCount: 2,
      beginSnapshot: 5,
      path: '/lake/main/geo_tbl/ducklake-019c7580-ab4f-71d7-a363-72519059f1ae.parquet',
    });
    const stats = await cat.catalog.query('SELECT min_value, max_value, extra_stats FROM ducklake_file_column_stats WHERE data_file_id = 1');
    expect(stats[0]).toMatchObject({ min_value: null, max_value: null });
    expect(JSON.parse(String(stats[0]!.extra_stats))).toMatchObject({ bbox: { xmin: 1, xmax: 3, ymin: 2, ymax: 4 }, types: ['point'] });
    // A type this reader cannot turn into a DuckDB query is refused by name, never read wrongly.
    const variant = await findTable(cat.catalog, 5, 'variant_tbl');
    const cols = await listColumns(cat.catalog, variant.tableId, 5);
    expect(() => scanSql(variant, cols, [], 5)).toThrow(/column v: column type 'variant' is not one chainlake reads/);
  });

  it('follows a column dropped at a snapshot (per_table_schema: T_1.a ends at snapshot 6)', async () => {
    const cat = await fixture('old_ducklake/per_table_schema.db.gz');
    const t1 = await findTable(cat.catalog, 5, 'T_1');
    const at = async (s: number) => (await listColumns(cat.catalog, t1.tableId, s)).map((c) => c.name);
    const ended = await cat.catalog.query(`SELECT column_name, begin_snapshot, end_snapshot FROM ducklake_column WHERE table_id = $1 ORDER BY column_id`, [
      t1.tableId,
    ]);
    const a = ended.find((r) => r.column_name === 'a')!;
    expect(a.end_snapshot).toBe(6);
    expect(await at(5)).toContain('a');
    expect(await at(6)).not.toContain('a');
    // Table names are case-sensitive: T, T_1 and T_2 are three tables.
    expect((await listTables(cat.catalog, 6)).map((t) => t.name).sort()).toEqual(['T', 'T_1', 'T_2']);
  });

  it('refuses a catalog of another version (v03 not migrated)', async () => {
    const file = await gunzipFixture('old_ducklake/v03.db.gz', dir);
    const cat = await openCatalogFile(file, { readOnly: true });
    opened.push(cat);
    await expect(planScan(cat.catalog, 'test')).rejects.toThrow(/version mismatch.*0\.3/);
  });
});

describe('DuckLake reader: columns renamed and added after files were written (field ids)', () => {
  it('reads old files under the new column name, and a column added later as its initial default', async () => {
    const { dir, cleanup } = await tempDir();
    const cat = await openCatalogFile(path.join(dir, 'catalog.duckdb'));
    try {
      const dataPath = path.join(dir, 'lake') + '/';
      await initialiseCatalog(cat.catalog, { dataPath });
      await createTable(cat.catalog, {
        name: 't',
        columns: [
          { name: 'id', type: 'BIGINT' },
          { name: 'amount', type: 'INTEGER' },
        ],
      });
      const table = await findTable(cat.catalog, 1, 't');
      const duck = await cat.connect();
      const file = await writeDataFile(
        duck,
        { dataPath, table, columns: await listColumns(cat.catalog, table.tableId, 1) },
        'SELECT range AS id, range * 10 AS amount FROM range(3)',
      );
      await commitFiles(cat.catalog, { tableName: 't', files: [file!] });
      // ALTER TABLE t RENAME amount TO value; ALTER TABLE t ADD COLUMN note VARCHAR DEFAULT 'none', written as the
      // spec describes them: a new snapshot, the old column version ended, a new version with the same column_id,
      // a new column_id for the new column with its initial default.
      await cat.catalog.transaction(async (tx) => {
        await tx.query(`INSERT INTO ducklake_snapshot VALUES (3, NOW(), 2, 2, 1)`);
        await tx.query(`INSERT INTO ducklake_snapshot_changes VALUES (3, 'altered_table:1', NULL, NULL, NULL)`);
        await tx.query(`UPDATE ducklake_column SET end_snapshot = 3 WHERE table_id = 1 AND column_id = 2 AND end_snapshot IS NULL`);
        await tx.query(`INSERT INTO ducklake_column VALUES (2, 3, NULL, 1, 2, 'value', 'int32', NULL, 'NULL', true, NULL, 'literal', 'duckdb')`);
        await tx.query(`INSERT INTO ducklake_column VALUES (3, 3, NULL, 1, 3, 'note', 'varchar', 'none', '''none''', true, NULL, 'literal', 'duckdb')`);
        await tx.query(`INSERT INTO ducklake_schema_versions VALUES (3, 2, 1)`);
      });
      const rows = async (asOf?: { snapshot: number }) => {
        const scan = await planScan(cat.catalog, 't', { asOf });
        const reader = await duck.runAndReadAll(`SELECT * FROM (${scan.sql}) ORDER BY id`);
        return { names: reader.columnNames(), rows: reader.getRowObjectsJS() };
      };
      expect(await rows()).toEqual({
        names: ['id', 'value', 'note'],
        rows: [0, 1, 2].map((i) => ({ id: BigInt(i), value: i * 10, note: 'none' })),
      });
      expect(await rows({ snapshot: 2 })).toEqual({ names: ['id', 'amount'], rows: [0, 1, 2].map((i) => ({ id: BigInt(i), amount: i * 10 })) });
    } finally {
      cat.close();
      await cleanup();
    }
  });
});
