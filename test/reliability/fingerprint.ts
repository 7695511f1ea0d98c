import { existsSync } from 'node:fs';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { DATASETS } from '../../src/datasets/registry.js';
import { REJECTS_SHAPE, datasetShape, type TableShape } from '../../src/load/schema.js';

/**
 * The canonical fingerprint of a lake: what "identical" means in every reliability test.
 *
 * Per table (each registry dataset and `_rejects`) that has files: the row count, the number of distinct
 * (natural key, partition) pairs (so a duplicate is visible even where it would not change a hash much), and an
 * order-independent hash of the rows — md5 of each row's JSON, sorted, then md5 of the concatenation — so
 * neither file order, row order inside a file, nor the way rows are split over partitions' row groups
 * matters, while every value, its type rendering and its partition (the Hive columns are part of the row) do.
 *
 * Excluded columns, because they say *when* a row was fetched, not what it is:
 * - `_run_id`, `_ingested_at` — the run columns;
 * - `confirmations` — the API counts it from the head at fetch time, so the same transaction fetched by two
 *   runs at different heads differs there and nowhere else;
 * - `origin_endpoint` where it is not part of the key — which of two endpoints listing the same key was
 *   fetched last (see PROVENANCE_COLUMNS).
 *
 * Rows are read straight from the Parquet files the DuckLake's newest snapshot lists (read with plain SQL
 * from catalog.duckdb's `ducklake_data_file`, not through chainlake's reader or views: the fingerprint must not
 * trust the code under test), and the partition columns inside them. `_staging` is never part of the lake.
 */
export interface TablePrint {
  rows: number;
  keys: number;
  hash: string;
}
export type LakePrint = Record<string, TablePrint>;

export const VOLATILE_COLUMNS = ['_run_id', '_ingested_at', 'confirmations'];
/**
 * Which endpoint gave a row, where two endpoints list the same key (nft_inventory: an account's inventory
 * and a token's): the newest fetch wins the merge, so after kills and re-runs it can be either, with every
 * data column equal (checked when this was found). Excluded unless it is part of the natural key.
 */
export const PROVENANCE_COLUMNS = ['origin_endpoint'];

const tables = (): TableShape[] => [...Object.values(DATASETS).map(datasetShape), REJECTS_SHAPE];
const str = (s: string): string => `'${s.replace(/'/g, "''")}'`;
const ident = (s: string): string => `"${s.replace(/"/g, '""')}"`;

/** The files of each table at the newest snapshot, by table name (absolute paths). */
async function currentFiles(lake: string): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  if (!existsSync(path.join(lake, 'catalog.duckdb'))) return out;
  const instance = await DuckDBInstance.create(':memory:');
  const conn = await instance.connect();
  try {
    await conn.run(`ATTACH ${str(path.join(lake, 'catalog.duckdb'))} AS c (READ_ONLY)`);
    const rows = (
      await conn.runAndReadAll(
        `SELECT t.table_name, sc.path || t.path || d.path FROM c.ducklake_data_file d JOIN c.ducklake_table t USING (table_id)
         JOIN c.ducklake_schema sc ON sc.schema_id = t.schema_id WHERE d.end_snapshot IS NULL AND t.end_snapshot IS NULL ORDER BY 2`,
      )
    ).getRowsJS() as [string, string][];
    for (const [table, file] of rows) out.set(table, [...(out.get(table) ?? []), path.join(lake, file)]);
  } finally {
    conn.closeSync();
    instance.closeSync();
  }
  return out;
}

/** The fingerprint of the lake at `lake` (tables without files are absent). */
export async function fingerprint(lake: string, opts: { only?: readonly string[] } = {}): Promise<LakePrint> {
  const instance = await DuckDBInstance.create(':memory:');
  const conn = await instance.connect();
  const q = async (sql: string) => (await conn.runAndReadAll(sql)).getRowObjectsJS() as Record<string, unknown>[];
  const out: LakePrint = {};
  try {
    await conn.run("SET TimeZone = 'UTC'");
    const current = await currentFiles(lake);
    for (const t of tables()) {
      if (opts.only && !opts.only.includes(t.name)) continue;
      const files = current.get(t.name) ?? [];
      if (files.length === 0) continue;
      const src = `read_parquet([${files.map(str).join(', ')}], union_by_name = true)`;
      const cols = (await q(`DESCRIBE SELECT * FROM ${src}`)).map((r) => String(r.column_name));
      const drop = [...VOLATILE_COLUMNS, ...PROVENANCE_COLUMNS.filter((c) => !t.key.includes(c))].filter((c) => cols.includes(c));
      const rows = `SELECT * ${drop.length ? `EXCLUDE (${drop.map(ident).join(', ')})` : ''} FROM ${src}`;
      // One row per natural key within a partition; NULL key parts count as values (to_json keeps them).
      const keyCols = [
        ...t.key.filter((c) => !drop.includes(c)),
        ...['network', 'block_date', 'snapshot_date', 'point_date', 'run_date'].filter((c) => cols.includes(c)),
      ];
      const key = `md5(to_json(struct_pack(${keyCols.map((c) => `${ident(c)} := ${ident(c)}`).join(', ')}))::VARCHAR)`;
      const [r] = await q(`
        SELECT count(*)::BIGINT AS n,
               count(DISTINCT k)::BIGINT AS k,
               md5(coalesce(string_agg(h, '' ORDER BY h), '')) AS hash
        FROM (SELECT md5(to_json(r)::VARCHAR) AS h, ${key} AS k FROM (${rows}) r)`);
      out[t.name] = { rows: Number(r!.n), keys: Number(r!.k), hash: String(r!.hash) };
    }
  } finally {
    conn.closeSync();
    instance.closeSync();
  }
  return out;
}

/** A one-line summary for test output: tables, rows. */
export function describePrint(p: LakePrint): string {
  const rows = Object.values(p).reduce((a, t) => a + t.rows, 0);
  return `${Object.keys(p).length} tables, ${rows} rows`;
}
