import type { DuckDBConnection } from '@duckdb/node-api';
import { emptyTypedSelect, type TableShape } from '../schema.js';
import { ident, literalList } from '../sql.js';
import { writeLakeFile, type LakeFile } from './lake-file.js';
import type { LakeTableState } from './lake-state.js';

/** Columns that identify a row's content, for a deterministic pick between rows of one key and one run. */
const contentColumns = (shape: TableShape): string[] => shape.columns.map((c) => c.name).filter((n) => n !== '_run_id' && n !== '_ingested_at');

/** The order among the rows of one key, best first: the newest `_ingested_at`, then a content hash (so the pick never depends on read order). */
export const keyRank = (shape: TableShape): string => `_ingested_at DESC, hash(${contentColumns(shape).map(ident).join(', ')})`;

/**
 * The query `rows` sorted by `order` into the table `table`, then reduced there to one row per key (the first
 * by `rank`). A sort of every row comes first because a commit's rows rarely repeat a key: a batch rarely lists
 * a row twice (two scoped addresses sharing a transaction do) and shares no key with the files it meets (those
 * hold other blocks of the same days, unless a run fetches blocks again). So the repeated keys are looked for
 * in the sorted table, which reads only the key columns from memory: looking for them in `rows` first had read
 * and decoded every source file twice. Only when some repeat are the rows of those keys ranked, and the losers
 * deleted: the table keeps its order (a scan skips deleted rows), so no second sort follows, and the ranking
 * is a statement of its own, so that its window and the sort never hold memory at the same time. Keys compare
 * with IS NOT DISTINCT FROM, as a window's PARTITION BY does: a NULL key part is a value like any other.
 * Returns how many rows were deleted.
 */
export async function sortedOnePerKey(
  conn: DuckDBConnection,
  rows: string,
  table: string,
  order: string,
  keyColumns: readonly string[],
  rank: string,
  repeated: string,
): Promise<number> {
  const key = keyColumns.join(', ');
  await conn.run(`CREATE OR REPLACE TABLE ${table} AS SELECT * FROM (${rows}) ORDER BY ${order}`);
  await conn.run(`CREATE OR REPLACE TEMP TABLE ${repeated} AS SELECT ${key} FROM ${table} GROUP BY ${key} HAVING count(*) > 1`);
  if (Number((await conn.runAndReadAll(`SELECT count(*)::BIGINT FROM ${repeated}`)).getRowsJS()[0]![0]) === 0) return 0;
  const on = keyColumns.map((k) => `r.${k} IS NOT DISTINCT FROM d.${k}`).join(' AND ');
  const deleted = await conn.runAndReadAll(
    `DELETE FROM ${table} WHERE rowid IN (
       SELECT __row FROM (SELECT r.rowid AS __row, r.* FROM ${table} r SEMI JOIN ${repeated} d ON ${on})
       QUALIFY row_number() OVER (PARTITION BY ${key} ORDER BY ${rank}) > 1)`,
  );
  return Number(deleted.getRowsJS()[0]?.[0] ?? 0);
}

/**
 * Writes one partition file: (existing files ∪ fresh rows) projected onto the shape's declared columns and
 * types, one row per natural key (the newest `_ingested_at` wins; a content hash breaks ties so the result
 * never depends on read order), sorted, as a data file of the lake's table (lake-file.ts). Existing files may
 * predate a column added to the declaration: they are read by name. `keep`, a condition on the existing rows,
 * drops those that fail it (rows the fresh ones replace under another key: a re-decoding's rejects).
 */
export async function writeMergedPartition(
  conn: DuckDBConnection,
  table: LakeTableState,
  shape: TableShape,
  partition: { network: string; value: string },
  opts: { existing: readonly string[]; fresh?: string; target: string; keep?: string },
): Promise<LakeFile> {
  const sources = [emptyTypedSelect(shape)];
  if (opts.existing.length > 0)
    sources.push(
      `SELECT * FROM read_parquet(${literalList(opts.existing)}, hive_partitioning = false, union_by_name = true)${opts.keep ? ` WHERE ${opts.keep}` : ''}`,
    );
  if (opts.fresh) sources.push(opts.fresh);
  const union = sources.map((s) => `(${s})`).join(' UNION ALL BY NAME ');
  const projection = shape.columns.map((c) => `CAST(${ident(c.name)} AS ${c.type}) AS ${ident(c.name)}`).join(', ');
  const key = shape.key.map(ident).join(', ');
  const order = [...shape.order, ...shape.key.filter((k) => !shape.order.includes(k))].map(ident).join(', ');
  const rows = `SELECT * EXCLUDE (__rank) FROM (
         SELECT *, row_number() OVER (PARTITION BY ${key} ORDER BY ${keyRank(shape)}) AS __rank
         FROM (SELECT ${projection} FROM (${union}))
       ) WHERE __rank = 1`;
  return writeLakeFile(conn, table, shape, partition, rows, opts.target, order);
}
