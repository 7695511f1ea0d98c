/**
 * Windows fetched again replace what the lake holds of them (finality: a provisional window's blocks may have been
 * reorganised, or an explorer's index may have listed them short; `verify --repair`: a window whose count differs
 * from the API's). One rule for both committers (load/write/commit.ts on
 * one machine, distributed/commit.ts): a partition merged with a replacing window's fresh rows drops its old rows
 * that the window's scope and block range hold (datasets/scope-rows.ts), so rows the new fetch no longer returns
 * are gone in the same snapshot; and the partitions merged include those whose files reach into a replaced range,
 * since a window whose rows all left a day brings no fresh row to that day's partition. event_logs' rows carry no
 * block number: a window of it replaces by the times of its first and last block (ScopeRange.times).
 */
import type { DuckDBAppender, DuckDBConnection } from '@duckdb/node-api';
import type { CatalogDb } from '../../ducklake/catalog-db.js';
import type { DatasetDef } from '../../datasets/dataset.js';
import { scopeRowsTable, type ScopeRange, type ScopeRowsValue } from '../../datasets/scope-rows.js';
import { ident } from '../sql.js';

export type { ScopeRange } from '../../datasets/scope-rows.js';

/** The condition a merge keeps a partition's old rows by, and the table of replaced windows it reads. */
export interface KeptRows {
  /** False for the old rows a replacing window holds (the fresh rows stand for them). */
  condition: string;
  /** Drops the table (the connection's own: it goes with the connection anyway). */
  drop(): Promise<void>;
}

let tables = 0;

/**
 * The kept-rows condition of a merge replacing `replacing`, on `conn` (the connection that reads the old rows): the
 * replaced windows go into a temporary table the condition joins (datasets/scope-rows.ts), so its plan and memory do
 * not grow with the windows. Undefined when no window is replaceable.
 */
export async function keptRows(conn: DuckDBConnection, def: DatasetDef, replacing: readonly ScopeRange[]): Promise<KeptRows | undefined> {
  const held = replacing.length > 0 ? scopeRowsTable(def, replacing) : undefined;
  if (held === undefined) return undefined;
  // Datasets of one commit are merged side by side, each on a connection of its own; a name of its own anyway.
  const name = `__chainlake_replaced_${def.name}_${++tables}`;
  const table = ident(name);
  await conn.run(`CREATE OR REPLACE TEMP TABLE ${table} (${held.columns.map(([column, type]) => `${ident(column)} ${type}`).join(', ')})`);
  const drop = async (): Promise<void> => void (await conn.run(`DROP TABLE IF EXISTS ${table}`));
  try {
    // Appended, not written as SQL: parsing a statement of thousands of windows cost more than the merge's read.
    const appender = await conn.createAppender(name, null, 'temp');
    try {
      for (const row of held.rows) {
        for (const v of row) append(appender, v);
        appender.endRow();
      }
      appender.flushSync();
    } finally {
      appender.closeSync();
    }
  } catch (err) {
    await drop().catch(() => undefined);
    throw err;
  }
  return { condition: `NOT COALESCE((${held.held(table)}), false)`, drop };
}

/** One value into the table's column of its type (a string into a TIMESTAMPTZ column: DuckDB casts it). */
function append(appender: DuckDBAppender, v: ScopeRowsValue): void {
  if (v === null) appender.appendNull();
  else if (typeof v === 'string') appender.appendVarchar(v);
  else if (typeof v === 'number') appender.appendBigInt(BigInt(v));
  else appender.appendBoolean(v);
}

/** The lowest and highest block of each current data file of a table, from the catalog's column statistics. */
export async function fileBlockSpans(db: CatalogDb, tableId: number, blockColumn: string): Promise<Map<number, { min: number | null; max: number | null }>> {
  const rows = await db.query(
    `SELECT st.data_file_id, st.min_value, st.max_value FROM ducklake_file_column_stats st
     JOIN ducklake_column c ON c.table_id = st.table_id AND c.column_id = st.column_id AND c.column_name = $2 AND c.end_snapshot IS NULL
     JOIN ducklake_data_file d ON d.data_file_id = st.data_file_id AND d.end_snapshot IS NULL
     WHERE st.table_id = $1`,
    [tableId, blockColumn],
  );
  const num = (v: unknown): number | null => (v === null || v === undefined || v === '' ? null : Number(v));
  return new Map(rows.map((r) => [Number(r.data_file_id), { min: num(r.min_value), max: num(r.max_value) }]));
}

/**
 * The partitions whose files may hold rows of the replaced ranges: a file overlapping one, or one without block
 * statistics (it might). `files`: each current file's partition and block span. A dataset whose rows carry a block
 * time but no block (DatasetDef.blockTimeColumn) and are partitioned by its day: the days between each window's
 * block times.
 */
export function partitionsReaching(
  def: DatasetDef,
  files: readonly { partition: string; span?: { min: number | null; max: number | null } }[],
  replacing: readonly ScopeRange[],
): string[] {
  if (replacing.length === 0) return [];
  const out = new Set<string>();
  const byDay = def.blockColumn === undefined && def.blockTimeColumn !== undefined && def.partitionFrom === def.blockTimeColumn;
  for (const f of files) {
    if (byDay) {
      // A window without its block times replaces nothing (scope-rows.ts), so it reaches no day.
      if (replacing.some((w) => w.times !== undefined && w.times.from.slice(0, 10) <= f.partition && f.partition <= w.times.to.slice(0, 10)))
        out.add(f.partition);
      continue;
    }
    const { min, max } = f.span ?? { min: null, max: null };
    if (min === null || max === null || replacing.some((w) => w.range.from <= max && w.range.to >= min)) out.add(f.partition);
  }
  return [...out];
}
