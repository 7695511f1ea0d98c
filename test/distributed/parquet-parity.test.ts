import { open } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DuckDBInstance } from '@duckdb/node-api';
import type { CatalogDb } from '../../src/ducklake/catalog-db.js';
import { currentSnapshot, dataPathOf, listDataFiles, listTables } from '../../src/ducklake/reader.js';
import { openCatalog } from '../../src/distributed/control-plane.js';
import { enqueueJob } from '../../src/distributed/enqueue.js';
import { openDistributedLake } from '../../src/distributed/read.js';
import { runWorker } from '../../src/distributed/worker.js';
import { loadJobDocument } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { openCatalogFile, openReference, referenceMissing } from '../ducklake/helpers.js';
import { startPostgres, type TestPostgres } from '../ducklake/postgres.js';
import { tempDir } from '../helpers/lake.js';
import { distributedRows, singleMachineRows } from './helpers.js';

/** Leaf columns whose values say when or by which run a row was fetched: their encodings may follow the values. */
const VOLATILE = new Set(['_run_id', '_ingested_at', 'confirmations']);

/** DuckDB's default row group size, the bound of every row group of a lake file in both modes. */
const ROW_GROUP_ROWS = 122_880;

interface FileProfile {
  formatVersion: number;
  rowGroups: number[];
  /** Per leaf column: its Parquet path, physical type, codec, encodings (volatile columns' left out) and first data page's type. */
  columns: string[];
}

/**
 * The type of the first data page of a column chunk, read from its page header (Thrift compact: field 1, i32,
 * zigzag varint): 0 is DATA_PAGE (format v1), 3 is DATA_PAGE_V2. DuckDB's parquet_metadata does not say.
 */
async function pageType(file: string, offset: number): Promise<number> {
  const handle = await open(file, 'r');
  try {
    const head = Buffer.alloc(2);
    await handle.read(head, 0, 2, offset);
    if (head[0] !== 0x15) throw new Error(`${file}: no page header at ${offset}`);
    return head[1]! >> 1;
  } finally {
    await handle.close();
  }
}

/** Each file's Parquet options as its footer and page headers record them, by file. */
async function profiles(files: readonly string[]): Promise<Map<string, FileProfile>> {
  const instance = await DuckDBInstance.create(':memory:');
  const conn = await instance.connect();
  try {
    const list = `[${files.map((f) => `'${f.replace(/'/g, "''")}'`).join(', ')}]`;
    const meta = (await conn.runAndReadAll(`SELECT file_name, format_version::INTEGER FROM parquet_file_metadata(${list})`)).getRowsJS() as [string, number][];
    const chunks = (
      await conn.runAndReadAll(
        `SELECT file_name, row_group_id::INTEGER, row_group_num_rows::INTEGER, path_in_schema, type, compression, encodings, data_page_offset::BIGINT
         FROM parquet_metadata(${list}) ORDER BY file_name, row_group_id, column_id`,
      )
    ).getRowsJS() as [string, number, number, string, string, string, string, bigint][];
    const out = new Map<string, FileProfile>(meta.map(([f, v]) => [f, { formatVersion: v, rowGroups: [], columns: [] }]));
    for (const [file, rg, rows, column, type, codec, encodings, offset] of chunks) {
      const p = out.get(file)!;
      if (p.rowGroups.length === rg) p.rowGroups.push(rows);
      if (rg > 0) continue;
      const leaf = column.split(', ')[0]!;
      const page = await pageType(file, Number(offset));
      p.columns.push(`${column} ${type} ${codec} ${VOLATILE.has(leaf) ? '*' : encodings} page ${page}`);
    }
    return out;
  } finally {
    conn.closeSync();
    instance.closeSync();
  }
}

/** The current data files of every table at the newest snapshot, by table and partition folder (network=…/date=…). */
async function currentFiles(catalog: CatalogDb, dataPath: string): Promise<Map<string, string>> {
  const snapshot = await currentSnapshot(catalog);
  const out = new Map<string, string>();
  for (const table of await listTables(catalog, snapshot.snapshotId)) {
    for (const f of await listDataFiles(catalog, table, snapshot.snapshotId, dataPath)) {
      const partition = path.dirname(f.storedPath);
      const key = `${table.name}/${partition}`;
      // One file per partition at a snapshot, in both modes.
      expect(out.has(key), key).toBe(false);
      out.set(key, f.path);
    }
  }
  return out;
}

/**
 * The statistics the catalog records for each current file, by table, partition folder and column name, without
 * the volatile columns' and the sizes (which follow the volatile values).
 */
async function fileStats(catalog: CatalogDb): Promise<Map<string, string[]>> {
  const rows = await catalog.query(
    `SELECT t.table_name, d.path, c.column_name, s.min_value, s.max_value, s.null_count, s.contains_nan
     FROM ducklake_file_column_stats s
     JOIN ducklake_data_file d ON d.data_file_id = s.data_file_id AND d.end_snapshot IS NULL
     JOIN ducklake_table t ON t.table_id = d.table_id AND t.end_snapshot IS NULL
     JOIN ducklake_column c ON c.table_id = s.table_id AND c.column_id = s.column_id AND c.end_snapshot IS NULL
     ORDER BY t.table_name, d.path, c.column_name`,
  );
  const out = new Map<string, string[]>();
  for (const r of rows) {
    if (VOLATILE.has(String(r.column_name))) continue;
    const key = `${String(r.table_name)}/${path.dirname(String(r.path))}`;
    out.set(key, [
      ...(out.get(key) ?? []),
      `${String(r.column_name)} ${String(r.min_value)}..${String(r.max_value)} nulls ${String(r.null_count)} nan ${String(r.contains_nan)}`,
    ]);
  }
  return out;
}

let pg: TestPostgres;
/** The two lakes of the first test, for the reference extension's reading of them. */
let lakes: { single: string; catalog: string; expected: Awaited<ReturnType<typeof singleMachineRows>> } | undefined;
let tmp: Awaited<ReturnType<typeof tempDir>>;

beforeAll(async () => {
  pg = await startPostgres();
  process.env.PGPASSWORD = pg.password;
  tmp = await tempDir('chainlake-parity-');
}, 120_000);

afterAll(async () => {
  await pg?.stop();
  await tmp?.cleanup();
});

describe('one lake-file writer for both modes', () => {
  it('the demo job on one machine and on three workers: the same rows, and every partition file written with the same Parquet options', async () => {
    const { job, doc } = await loadJobDocument(path.resolve('jobs/demo.json'));
    const lake = path.join(tmp.dir, 'single');
    await runJob({ ...job, lake });
    const expected = await singleMachineRows(lake);
    expect(expected.size).toBeGreaterThanOrEqual(18);

    const db = await pg.database();
    const store = path.join(tmp.dir, 'store');
    await enqueueJob(job, doc, { catalog: db.url, store });
    // An account each: workers of one account take turns, these fetch side by side.
    const reports = await Promise.all(
      ['p1', 'p2', 'p3'].map((id) =>
        runWorker({ catalog: db.url, store, id, account: id, untilIdle: true, pollMs: 100, leaseSeconds: 30, commitRows: 20_000 }),
      ),
    );
    expect(reports.filter((r) => r.windowsFetched > 0).length, 'windows fetched by each worker').toBeGreaterThanOrEqual(2);
    expect(reports.reduce((n, r) => n + r.windowsFailed, 0)).toBe(0);
    lakes = { single: lake, catalog: db.url, expected };

    // Row for row.
    const dist = await openDistributedLake({ catalog: db.url });
    try {
      for (const [name, want] of expected) {
        if (!dist.tables.includes(name)) {
          expect({ name, rows: want.rows }).toEqual({ name, rows: 0 });
          continue;
        }
        expect({ name, ...(await distributedRows(dist.conn, name, want.columns)) }).toEqual({ name, rows: want.rows, digest: want.digest });
      }
    } finally {
      dist.close();
    }

    // File option for file option, partition by partition.
    const single = await openCatalogFile(path.join(lake, 'catalog.duckdb'), { readOnly: true });
    const [singleFiles, singleStats] = await Promise.all([currentFiles(single.catalog, `${lake}/`), fileStats(single.catalog)]).finally(() => single.close());
    const cat = await openCatalog(db.url);
    const [distFiles, distStats] = await Promise.all([currentFiles(cat.catalog, await dataPathOf(cat.catalog)), fileStats(cat.catalog)]).finally(() =>
      cat.client.end(),
    );
    expect([...distFiles.keys()].sort()).toEqual([...singleFiles.keys()].sort());
    // The statistics the catalog records, taken the same way from the same rows.
    expect(singleStats.size).toBe(singleFiles.size);
    for (const [key, stats] of singleStats) expect({ key, stats: distStats.get(key) }).toEqual({ key, stats });
    expect(singleFiles.size).toBeGreaterThan(50);
    const mine = await profiles([...singleFiles.values()]);
    const theirs = await profiles([...distFiles.values()]);
    expect([...mine.values()].some((p) => p.columns.some((c) => / DELTA_BINARY_PACKED /.test(c)))).toBe(true);
    for (const [key, file] of singleFiles) {
      const one = mine.get(file)!;
      // The single machine's options (LAKE_PARQUET): format version 2, ZSTD. DuckDB writes the version's
      // encodings (delta, byte-stream-split) but version 1 data page headers: the page type is compared as is.
      expect({ key, version: one.formatVersion }).toEqual({ key, version: 2 });
      for (const c of one.columns) expect(c, key).toMatch(/ ZSTD /);
      for (const n of one.rowGroups) expect(n).toBeLessThanOrEqual(ROW_GROUP_ROWS);
      expect({ key, ...theirs.get(distFiles.get(key)!)! }).toEqual({ key, ...one });
    }
  }, 300_000);

  const missing = referenceMissing();
  it.skipIf(missing !== null)(
    `the reference ducklake extension reads both lakes with the same rows as chainlake${missing ? ` (${missing})` : ''}`,
    async () => {
      expect(lakes, 'the lakes of the test before').toBeDefined();
      const { single, catalog, expected } = lakes!;
      for (const source of [path.join(single, 'catalog.duckdb'), catalog]) {
        const ref = await openReference(source);
        try {
          const tables = ((await ref.conn.runAndReadAll(`SELECT table_name FROM duckdb_tables() WHERE database_name = 'ref'`)).getRowsJS() as [string][]).map(
            ([t]) => t,
          );
          for (const [name, want] of expected) {
            if (!tables.includes(name)) {
              expect({ source, name, rows: want.rows }).toEqual({ source, name, rows: 0 });
              continue;
            }
            expect({ source, name, ...(await distributedRows(ref.conn, name, want.columns)) }).toEqual({ source, name, rows: want.rows, digest: want.digest });
          }
        } finally {
          ref.close();
        }
      }
    },
    120_000,
  );
});
