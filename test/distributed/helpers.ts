import { createHash } from 'node:crypto';
import type { DuckDBConnection } from '@duckdb/node-api';
import { queryCatalog } from '../helpers/lake.js';

/** Columns that say when or by which run a row was fetched (and `confirmations`, which counts from the head then). */
const VOLATILE = new Set(['_run_id', '_ingested_at', 'confirmations']);

const digestOf = (rows: Record<string, unknown>[]) =>
  createHash('sha256')
    .update(JSON.stringify(rows, (_, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)))
    .digest('hex');

/**
 * Every dataset of a single-machine lake, as rows without the volatile columns, with the columns in name order:
 * what a distributed lake of the same job must equal, row for row.
 */
export async function singleMachineRows(lake: string): Promise<Map<string, { columns: string[]; rows: number; digest: string }>> {
  const out = new Map<string, { columns: string[]; rows: number; digest: string }>();
  const views = (await queryCatalog(lake, `SELECT view_name FROM duckdb_views() WHERE NOT internal AND schema_name = 'main'`)).map((r) => String(r.view_name));
  for (const v of views) {
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
