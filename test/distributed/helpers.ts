import { createHash } from 'node:crypto';
import { open, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { expect } from 'vitest';
import type { CatalogDb } from '../../src/ducklake/catalog-db.js';
import { currentSnapshot, dataPathOf, listDataFiles, listTables } from '../../src/ducklake/reader.js';
import { openCatalog } from '../../src/distributed/control-plane.js';
import { openCatalogFile } from '../ducklake/helpers.js';
import { openDistributedLake } from '../../src/distributed/read.js';
import type { StoreConnection } from '../../src/distributed/store.js';
import { queryCatalog } from '../helpers/lake.js';

/**
 * Columns that say when or by which run a row was fetched (and `confirmations`, which counts from the head then):
 * left out of row comparisons, and their encodings out of file comparisons (they may follow the values).
 */
export const VOLATILE = new Set(['_run_id', '_ingested_at', 'confirmations']);

const digestOf = (rows: Record<string, unknown>[]) =>
  createHash('sha256')
    .update(JSON.stringify(rows, (_, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)))
    .digest('hex');

/**
 * Every dataset of a single-machine lake, as rows without the volatile columns, with the columns in name order:
 * what a distributed lake of the same job must equal, row for row. `only`: just those tables (the others are not read).
 */
export async function singleMachineRows(lake: string, only?: readonly string[]): Promise<Map<string, { columns: string[]; rows: number; digest: string }>> {
  const out = new Map<string, { columns: string[]; rows: number; digest: string }>();
  const views = (await queryCatalog(lake, `SELECT view_name FROM duckdb_views() WHERE NOT internal AND schema_name = 'main'`)).map((r) => String(r.view_name));
  for (const v of views) {
    if (only && !only.includes(v)) continue;
    // `files` is the catalog's view of the DuckLake's files, not a table of the lake.
    if ((v.startsWith('_') && v !== '_rejects') || v === 'files') continue;
    const columns = (await queryCatalog(lake, `DESCRIBE "${v}"`)).map((r) => String(r.column_name)).filter((c) => !VOLATILE.has(c));
    if (columns.length === 0) continue;
    columns.sort();
    const rows = await queryCatalog(lake, `SELECT ${columns.map((c) => `"${c}"`).join(', ')} FROM "${v}" ORDER BY ALL`);
    out.set(v, { columns, rows: rows.length, digest: digestOf(rows) });
  }
  return out;
}

export async function distributedRows(conn: DuckDBConnection, table: string, columns: readonly string[]): Promise<{ rows: number; digest: string }> {
  const rows = (await conn.runAndReadAll(`SELECT ${columns.map((c) => `"${c}"`).join(', ')} FROM "${table}" ORDER BY ALL`)).getRowObjectsJS() as Record<
    string,
    unknown
  >[];
  return { rows: rows.length, digest: digestOf(rows) };
}

/** DuckDB's default row group size, the bound of every row group of a lake file in both modes. */
const ROW_GROUP_ROWS = 122_880;

export interface FileProfile {
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
export async function profiles(files: readonly string[]): Promise<Map<string, FileProfile>> {
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
export async function currentFiles(catalog: CatalogDb, dataPath: string): Promise<Map<string, string>> {
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
 * The lake files of one job written on one machine (`single`, a lake folder) and distributed (`catalog`, its
 * PostgreSQL URL, the store a local folder), compared partition by partition: the same partitions, each file with the
 * single machine's Parquet options (LAKE_PARQUET: format version 2, ZSTD), row groups within DuckDB's bound, and the
 * same options, encodings and row groups in the distributed file. Returns both lakes' files and the single machine's
 * profiles.
 */
export async function expectSameFileOptions(
  single: string,
  catalog: string,
): Promise<{ singleFiles: Map<string, string>; distFiles: Map<string, string>; mine: Map<string, FileProfile> }> {
  const one = await openCatalogFile(path.join(single, 'catalog.duckdb'), { readOnly: true });
  const singleFiles = await currentFiles(one.catalog, `${single}/`).finally(() => one.close());
  const cat = await openCatalog(catalog);
  const distFiles = await currentFiles(cat.catalog, await dataPathOf(cat.catalog)).finally(() => cat.client.end());
  expect([...distFiles.keys()].sort()).toEqual([...singleFiles.keys()].sort());
  const mine = await profiles([...singleFiles.values()]);
  const theirs = await profiles([...distFiles.values()]);
  for (const [key, file] of singleFiles) {
    const p = mine.get(file)!;
    // DuckDB writes the version's encodings (delta, byte-stream-split) but version 1 data page headers: the page
    // type is compared as is.
    expect({ key, version: p.formatVersion }).toEqual({ key, version: 2 });
    for (const c of p.columns) expect(c, key).toMatch(/ ZSTD /);
    for (const n of p.rowGroups) expect(n).toBeLessThanOrEqual(ROW_GROUP_ROWS);
    expect({ key, ...theirs.get(distFiles.get(key)!)! }).toEqual({ key, ...p });
  }
  return { singleFiles, distFiles, mine };
}

type Rows = Record<string, unknown>[];

/** The rows of `sql` as chainlake's distributed reader (what `query --catalog` opens) reads them. */
export async function chainlakeQuery(catalogUrl: string, store: string, sql: string, storeConnection?: StoreConnection): Promise<Rows> {
  const lake = await openDistributedLake({ catalog: catalogUrl, store, ...(storeConnection ? { storeConnection } : {}) });
  try {
    return (await lake.conn.runAndReadAll(sql)).getRowObjectsJS() as Rows;
  } finally {
    lake.close();
  }
}

/**
 * The demo job (every dataset of both APIs) over the chain's first `toBlock` blocks, written into `dir`; the whole
 * demo job's file without `toBlock`. Every row is fetched twice in the tests that compare workers with one machine,
 * and what they prove (every dataset and kind of partition, kills in every step) does not grow with the rows.
 */
export async function demoJobFile(dir: string, toBlock?: number): Promise<string> {
  const file = path.resolve('jobs/demo.json');
  if (toBlock === undefined) return file;
  const doc = JSON.parse(await readFile(file, 'utf8')) as { range: Record<string, unknown> };
  doc.range = { ...doc.range, toBlock };
  const cut = path.join(dir, `demo-${toBlock}.json`);
  await writeFile(cut, JSON.stringify(doc));
  return cut;
}

/** A simulator job of the transactions of `addresses` (the shared-lake tests' runs). */
export const jobDoc = (name: string, addresses: readonly string[]) => ({
  name,
  network: 'mainnet',
  target: 'simulator',
  simulator: { seed: 1, scale: 'small' },
  datasets: { transactions: { addresses: [...addresses] } },
});

/** A transaction row the reference extension inserts (after INSERT): keys no API returns, so only the reference's writes can explain them. */
export const inserted = (hash: string, day: string, block: number) =>
  `('${hash}', ${block}, 0, 'mainnet', DATE '${day}', 'reference', TIMESTAMPTZ '2026-01-01 00:00:00+00')`;
export const INSERT = 'INSERT INTO ref.transactions (transaction_hash, block_number, transaction_index, network, block_date, _run_id, _ingested_at) VALUES ';
