import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DuckDBConnection } from '@duckdb/node-api';
import { DuckDbCatalog } from '../../src/ducklake/catalog-db.js';
import { checkVersion, DUCKLAKE_TABLES, DUCKLAKE_VERSION, initialiseCatalog, readMetadata } from '../../src/ducklake/ddl.js';
import { PostgresCatalog } from '../../src/ducklake/postgres-catalog.js';
import { writeDataFile } from '../../src/ducklake/data-file.js';
import { currentSnapshot, findTable, listColumns, planScan } from '../../src/ducklake/reader.js';
import { commitFiles, createTable } from '../../src/ducklake/writer.js';
import { FIXTURES, gunzipFixture, openCatalogFile, openReference, referenceMissing, tempDir, type OpenCatalog } from './helpers.js';
import { startPostgres, type TestPostgres } from './postgres.js';

interface ColumnRow {
  table_name: string;
  column_index: number;
  column_name: string;
  data_type: string;
  is_nullable: boolean;
}

/** The layout of the DuckLake tables of one attached database: every column, in order, with type and nullability. */
async function layout(conn: DuckDBConnection, database: string): Promise<Map<string, ColumnRow[]>> {
  const reader = await conn.runAndReadAll(
    `SELECT table_name, column_index::INTEGER AS column_index, column_name, data_type, is_nullable
     FROM duckdb_columns() WHERE database_name = $1 AND table_name LIKE 'ducklake\\_%' ESCAPE '\\'
       AND table_name NOT LIKE 'ducklake\\_inlined\\_data\\_%\\_%' ESCAPE '\\'
     ORDER BY table_name, column_index`,
    [database],
  );
  const tables = new Map<string, ColumnRow[]>();
  for (const row of reader.getRowObjectsJS() as unknown as ColumnRow[]) {
    const list = tables.get(row.table_name) ?? [];
    list.push(row);
    tables.set(row.table_name, list);
  }
  return tables;
}

async function primaryKeys(conn: DuckDBConnection, database: string): Promise<string[]> {
  const reader = await conn.runAndReadAll(
    `SELECT table_name || '(' || array_to_string(constraint_column_names, ',') || ')' AS pk
     FROM duckdb_constraints() WHERE database_name = $1 AND constraint_type = 'PRIMARY KEY' ORDER BY 1`,
    [database],
  );
  return reader.getRowObjectsJS().map((r) => String(r.pk));
}

/** Compares two layouts table by table and column by column; returns every difference found. */
function differences(actual: Map<string, ColumnRow[]>, expected: Map<string, ColumnRow[]>): string[] {
  const out: string[] = [];
  for (const name of new Set([...actual.keys(), ...expected.keys()])) {
    const a = actual.get(name);
    const e = expected.get(name);
    if (!a || !e) {
      out.push(`${name}: ${a ? 'unexpected table' : 'missing table'}`);
      continue;
    }
    for (let i = 0; i < Math.max(a.length, e.length); i++) {
      const ac = a[i];
      const ec = e[i];
      const show = (c?: ColumnRow) => (c ? `${c.column_name} ${c.data_type}${c.is_nullable ? '' : ' NOT NULL'}` : '(none)');
      if (show(ac) !== show(ec)) out.push(`${name} column ${i + 1}: ${show(ac)} instead of ${show(ec)}`);
    }
  }
  return out;
}

describe('DuckLake 1.0 catalog conformance', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let ours: OpenCatalog;

  beforeAll(async () => {
    ({ dir, cleanup } = await tempDir());
    ours = await openCatalogFile(path.join(dir, 'catalog.duckdb'));
    await initialiseCatalog(ours.catalog, { dataPath: path.join(dir, 'data') });
    // The spec's own creation script, run verbatim in a second database of the same instance.
    await ours.conn.run(`ATTACH ':memory:' AS spec`);
    const script = await readFile(path.join(FIXTURES, 'spec-ddl.sql'), 'utf8');
    await ours.conn.run('USE spec');
    await ours.conn.run(script);
    await ours.conn.run('USE cat');
  });

  afterAll(async () => {
    ours?.close();
    await cleanup?.();
  });

  it('creates the 28 tables of the spec, column for column (names, order, types, NOT NULL, primary keys)', async () => {
    const mine = await layout(ours.conn, 'cat');
    const spec = await layout(ours.conn, 'spec');
    expect(spec.size).toBe(28);
    expect(mine.size).toBe(28);
    expect(DUCKLAKE_TABLES).toHaveLength(28);
    expect(differences(mine, spec)).toEqual([]);
    expect(await primaryKeys(ours.conn, 'cat')).toEqual(await primaryKeys(ours.conn, 'spec'));
    expect(await primaryKeys(ours.conn, 'cat')).toEqual([
      'ducklake_data_file(data_file_id)',
      'ducklake_delete_file(delete_file_id)',
      'ducklake_schema(schema_id)',
      'ducklake_snapshot(snapshot_id)',
      'ducklake_snapshot_changes(snapshot_id)',
    ]);
  });

  it('matches the layout of the catalogs the reference extension wrote in the 1.0 layout (v04, v04-dev1_types)', async () => {
    const mine = await layout(ours.conn, 'cat');
    for (const fixture of ['old_ducklake/v04.db.gz', 'old_ducklake/v04-dev1_types.db.gz']) {
      const file = await gunzipFixture(fixture, dir);
      const alias = path.basename(file, '.db').replace(/\W/g, '_');
      await ours.conn.run(`ATTACH '${file}' AS ${alias} (READ_ONLY)`);
      expect(differences(mine, await layout(ours.conn, alias)), fixture).toEqual([]);
      expect(await primaryKeys(ours.conn, alias)).toEqual(await primaryKeys(ours.conn, 'cat'));
    }
  });

  it('tells a pre-1.0 layout apart (the comparison can fail): v04-dev1 still has partial_file_info', async () => {
    const file = await gunzipFixture('old_ducklake/v04-dev1.db.gz', dir);
    await ours.conn.run(`ATTACH '${file}' AS v04dev1 (READ_ONLY)`);
    const diff = differences(await layout(ours.conn, 'v04dev1'), await layout(ours.conn, 'cat'));
    expect(diff.join('\n')).toMatch(/ducklake_data_file column \d+: partial_file_info/);
  });

  it('every fixture catalog opens with this DuckDB (1.5): none is of a storage version it cannot read', async () => {
    const names = [
      'v01',
      'v01_partitioned',
      'v02',
      'v03-dev1',
      'v03',
      'v03_types',
      'v04-dev1',
      'v04-dev1_types',
      'v04',
      'compacted_files',
      'per_table_schema',
    ].map((n) => `old_ducklake/${n}.db.gz`);
    names.push('iceberg_deletes/delete_ignore_extra_columns.db.gz');
    const versions: Record<string, string> = {};
    for (const fixture of names) {
      const file = await gunzipFixture(fixture, dir);
      const opened = await openCatalogFile(file, { readOnly: true });
      try {
        const rows = await opened.catalog.query(`SELECT "value" FROM ducklake_metadata WHERE "key" = 'version'`);
        versions[path.basename(file, '.db')] = String(rows[0]?.value);
      } finally {
        opened.close();
      }
    }
    expect(versions).toMatchObject({ v01: '0.1', v04: '0.4', 'v04-dev1_types': '0.4-dev1', delete_ignore_extra_columns: '0.3' });
  });

  it('writes the initial rows the reference extension writes (compared with v04)', async () => {
    const file = await gunzipFixture('old_ducklake/v04.db.gz', dir);
    const ref = await openCatalogFile(file, { readOnly: true });
    try {
      const initialRows = async (db: DuckDbCatalog) => ({
        snapshot: await db.query('SELECT snapshot_id, schema_version, next_catalog_id, next_file_id FROM ducklake_snapshot WHERE snapshot_id = 0'),
        changes: await db.query('SELECT * FROM ducklake_snapshot_changes WHERE snapshot_id = 0'),
        schema: await db.query(
          'SELECT schema_id, begin_snapshot, end_snapshot, schema_name, path, path_is_relative, schema_uuid IS NOT NULL AS has_uuid FROM ducklake_schema',
        ),
        metadataKeys: (await db.query(`SELECT "key" FROM ducklake_metadata ORDER BY "key"`)).map((r) => r.key),
      });
      const mine = await initialRows(ours.catalog);
      expect(mine).toEqual(await initialRows(ref.catalog));
      expect(mine.snapshot).toEqual([{ snapshot_id: 0, schema_version: 0, next_catalog_id: 1, next_file_id: 0 }]);
      expect(mine.changes).toEqual([{ snapshot_id: 0, changes_made: 'created_schema:"main"', author: null, commit_message: null, commit_extra_info: null }]);
      const metadata = await readMetadata(ours.catalog);
      expect(metadata.get('version')).toBe('1.0');
      expect(metadata.get('data_path')).toBe(path.join(dir, 'data') + '/');
      expect(metadata.get('encrypted')).toBe('false');
      // Nothing else: no table, file, or statistics row yet.
      expect(await ours.catalog.query('SELECT count(*) AS n FROM ducklake_table')).toEqual([{ n: 0 }]);
    } finally {
      ref.close();
    }
  });

  it('refuses catalogs of another version, and reads v04 once migrated to 1.0 as the extension does', async () => {
    expect((await checkVersion(ours.catalog)).get('version')).toBe(DUCKLAKE_VERSION);
    const file = await gunzipFixture('old_ducklake/v04.db.gz', dir);
    const ref = await openCatalogFile(file);
    try {
      await expect(checkVersion(ref.catalog)).rejects.toThrow(/version mismatch.*0\.4/);
      await ref.catalog.query(`UPDATE ducklake_metadata SET "value" = '1.0' WHERE "key" = 'version'`);
      await expect(checkVersion(ref.catalog)).resolves.toBeInstanceOf(Map);
    } finally {
      ref.close();
    }
  });

  it('rolls a failed initialisation back whole (no half-created catalog)', async () => {
    const again = await openCatalogFile(path.join(dir, 'second.duckdb'));
    try {
      await again.catalog.query('CREATE TABLE ducklake_tag (x INTEGER)'); // makes the 7th CREATE fail
      await expect(initialiseCatalog(again.catalog, { dataPath: dir })).rejects.toThrow(/ducklake_tag/);
      expect(await again.catalog.query(`SELECT count(*) AS n FROM duckdb_tables() WHERE database_name = 'cat'`)).toEqual([{ n: 1 }]);
    } finally {
      again.close();
    }
  });
});

/** DuckDB's type names as PostgreSQL's information_schema spells the same types. */
const PG_TYPE: Record<string, string> = {
  BIGINT: 'bigint',
  VARCHAR: 'character varying',
  BOOLEAN: 'boolean',
  UUID: 'uuid',
  'TIMESTAMP WITH TIME ZONE': 'timestamp with time zone',
};

describe('DuckLake 1.0 catalog conformance on PostgreSQL', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let postgres: TestPostgres;
  let client: Awaited<ReturnType<Awaited<ReturnType<TestPostgres['database']>>['connect']>>;
  let catalog: PostgresCatalog;

  beforeAll(async () => {
    ({ dir, cleanup } = await tempDir());
    postgres = await startPostgres();
    client = await (await postgres.database()).connect();
    catalog = new PostgresCatalog(client);
    await initialiseCatalog(catalog, { dataPath: 's3://bucket/lake' });
    // The spec's creation script, verbatim, in a schema of its own.
    await client.query('CREATE SCHEMA spec');
    await client.query('SET search_path TO spec');
    await client.query(await readFile(path.join(FIXTURES, 'spec-ddl.sql'), 'utf8'));
    await client.query('SET search_path TO public');
  });
  afterAll(async () => {
    await postgres?.stop();
    await cleanup?.();
  });

  async function pgLayout(schema: string): Promise<Map<string, ColumnRow[]>> {
    const rows = await catalog.query(
      `SELECT table_name, ordinal_position AS column_index, column_name, data_type, is_nullable = 'YES' AS is_nullable
       FROM information_schema.columns WHERE table_schema = $1 AND table_name LIKE 'ducklake%' ORDER BY table_name, ordinal_position`,
      [schema],
    );
    const tables = new Map<string, ColumnRow[]>();
    for (const row of rows as unknown as ColumnRow[]) tables.set(row.table_name, [...(tables.get(row.table_name) ?? []), row]);
    return tables;
  }
  async function pgPrimaryKeys(schema: string): Promise<string[]> {
    const rows = await catalog.query(
      `SELECT tc.table_name || '(' || string_agg(k.column_name, ',' ORDER BY k.ordinal_position) || ')' AS pk
       FROM information_schema.table_constraints tc
       JOIN information_schema.key_column_usage k ON k.constraint_name = tc.constraint_name AND k.table_schema = tc.table_schema
       WHERE tc.table_schema = $1 AND tc.constraint_type = 'PRIMARY KEY' GROUP BY tc.table_name ORDER BY 1`,
      [schema],
    );
    return rows.map((r) => String(r.pk));
  }

  it('the same DDL creates the 28 tables in PostgreSQL, column for column as the spec script does there', async () => {
    const mine = await pgLayout('public');
    expect(mine.size).toBe(28);
    expect(differences(mine, await pgLayout('spec'))).toEqual([]);
    expect(await pgPrimaryKeys('public')).toEqual(await pgPrimaryKeys('spec'));
    expect(await pgPrimaryKeys('public')).toHaveLength(5);
  });

  it('matches the reference extension catalog v04.db column for column, with the types PostgreSQL gives the same names', async () => {
    const file = await gunzipFixture('old_ducklake/v04.db.gz', dir);
    const ref = await openCatalogFile(file, { readOnly: true });
    try {
      const duck = await layout(ref.conn, 'cat');
      const asPg = new Map([...duck].map(([t, cols]) => [t, cols.map((c) => ({ ...c, data_type: PG_TYPE[c.data_type] ?? `unmapped ${c.data_type}` }))]));
      expect(differences(await pgLayout('public'), asPg)).toEqual([]);
    } finally {
      ref.close();
    }
  });

  it('writes the same initial rows as on DuckDB', async () => {
    expect(await catalog.query('SELECT snapshot_id, schema_version, next_catalog_id, next_file_id FROM ducklake_snapshot')).toEqual([
      { snapshot_id: 0, schema_version: 0, next_catalog_id: 1, next_file_id: 0 },
    ]);
    expect(await catalog.query('SELECT changes_made FROM ducklake_snapshot_changes')).toEqual([{ changes_made: 'created_schema:"main"' }]);
    expect(await catalog.query('SELECT schema_id, begin_snapshot, end_snapshot, schema_name, path, path_is_relative FROM ducklake_schema')).toEqual([
      { schema_id: 0, begin_snapshot: 0, end_snapshot: null, schema_name: 'main', path: 'main/', path_is_relative: true },
    ]);
    const metadata = await readMetadata(catalog);
    expect(Object.fromEntries(metadata)).toEqual({ version: '1.0', created_by: 'chainlake', data_path: 's3://bucket/lake/', encrypted: 'false' });
  });
});

const json = (rows: unknown) => JSON.stringify(rows, (_, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));

/** Filters the extension answers from the files' statistics first (partition values, min and max). */
const FILTERS = [
  'true',
  `block_date = DATE '2024-01-02'`,
  `network = 'testnet'`,
  'id BETWEEN 35 AND 45',
  `ts >= TIMESTAMPTZ '2024-01-01 00:01:55+00'`,
  'amount > 100000000000000000000',
  'ok',
];

describe('the reference ducklake extension reads what the data-file writer writes', () => {
  const missing = referenceMissing();
  it.skipIf(missing !== null)(
    `every snapshot of a partitioned table (lists, decimals, timestamps, NaN, a column written as NULL, a replaced partition) reads the same through the reference extension as through chainlake's reader${missing ? ` (${missing})` : ''}`,
    async () => {
      const { dir, cleanup } = await tempDir();
      try {
        const file = path.join(dir, 'catalog.duckdb');
        const cat = await openCatalogFile(file);
        // By snapshot and filter: the extension prunes files by the statistics the writer recorded.
        const ours = new Map<string, string>();
        let newest = 0;
        try {
          await initialiseCatalog(cat.catalog, { dataPath: path.join(dir, 'lake') });
          await createTable(cat.catalog, {
            name: 'transfers',
            columns: [
              { name: 'id', type: 'BIGINT' },
              { name: 'amount', type: 'DECIMAL(38,0)' },
              { name: 'ts', type: 'TIMESTAMP WITH TIME ZONE' },
              { name: 'ok', type: 'BOOLEAN' },
              { name: 'score', type: 'DOUBLE' },
              { name: 'topics', type: 'VARCHAR[]' },
              { name: 'memo', type: 'VARCHAR' },
              { name: 'network', type: 'VARCHAR' },
              { name: 'block_date', type: 'DATE' },
            ],
            partitionBy: ['network', 'block_date'],
          });
          const duck = await cat.connect();
          const write = async (network: string, day: string, from: number, to: number) => {
            const snap = await currentSnapshot(cat.catalog);
            const table = await findTable(cat.catalog, snap.snapshotId, 'transfers');
            const columns = await listColumns(cat.catalog, table.tableId, snap.snapshotId);
            const values = { network, block_date: day };
            // As both modes write: the partition's values as constants, a column the rows lack (memo) as NULL.
            const rows = {
              sql: `SELECT range AS id, CAST(range AS DECIMAL(38,0)) * 1000000000000000000 AS amount, TIMESTAMPTZ '${day} 00:00:00+00' + to_seconds(range) AS ts,
                           range % 2 = 0 AS ok, CASE WHEN range % 7 = 3 THEN 'nan'::DOUBLE ELSE range / 4 END AS score,
                           CASE WHEN range % 5 = 0 THEN NULL ELSE ['t' || range, 'u'] END AS topics FROM range(${from}, ${to})`,
              present: new Set(['id', 'amount', 'ts', 'ok', 'score', 'topics']),
              constants: values,
              order: 'id',
            };
            const staged = await writeDataFile(duck, { dataPath: path.join(dir, 'lake') + '/', table, columns }, rows, values);
            return staged!;
          };
          await commitFiles(cat.catalog, {
            tableName: 'transfers',
            files: [await write('mainnet', '2024-01-01', 0, 40), await write('testnet', '2024-01-01', 40, 60)],
          });
          await commitFiles(cat.catalog, {
            tableName: 'transfers',
            files: [await write('mainnet', '2024-01-02', 60, 90)],
          });
          await commitFiles(cat.catalog, {
            tableName: 'transfers',
            files: [await write('mainnet', '2024-01-01', 100, 130)],
            replacePartitions: [['mainnet', '2024-01-01']],
          });
          newest = (await currentSnapshot(cat.catalog)).snapshotId;
          for (let snapshot = newest - 2; snapshot <= newest; snapshot++) {
            const scan = await planScan(cat.catalog, 'transfers', { asOf: { snapshot } });
            for (const where of FILTERS) {
              ours.set(`${snapshot} ${where}`, json((await duck.runAndReadAll(`SELECT * FROM (${scan.sql}) WHERE ${where} ORDER BY ALL`)).getRowObjectsJS()));
            }
          }
        } finally {
          cat.close();
        }
        const ref = await openReference(file);
        try {
          for (const [key, rows] of ours) {
            const [snapshot, where] = [key.slice(0, key.indexOf(' ')), key.slice(key.indexOf(' ') + 1)];
            const theirs = json(
              (await ref.conn.runAndReadAll(`SELECT * FROM transfers AT (VERSION => ${snapshot}) WHERE ${where} ORDER BY ALL`)).getRowObjectsJS(),
            );
            // Each filter selects rows at the newest snapshot.
            if (Number(snapshot) === newest || where === 'true') expect(theirs, `snapshot ${key}`).not.toBe('[]');
            expect(theirs, `snapshot ${key}`).toBe(rows);
          }
          const [[files]] = (await ref.conn.runAndReadAll(`SELECT count(*)::INTEGER FROM ducklake_list_files('ref', 'transfers')`)).getRowsJS() as [[number]];
          expect(files).toBe(3);
        } finally {
          ref.close();
        }
      } finally {
        await cleanup();
      }
    },
    120_000,
  );
});
