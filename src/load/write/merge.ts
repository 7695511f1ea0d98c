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
 * The query `rows` reduced to one row per key (the first by `rank`), as a query; `rows` itself when no key
 * repeats. That is the common case in a commit: a batch rarely lists a row twice (two scoped addresses sharing
 * a transaction do) and shares no key with the files it meets (those hold other blocks of the same days,
 * unless a run fetches blocks again), and a grouping of the keys alone costs a fraction of a sort.
 * Otherwise only the repeated keys' rows are ranked, into the temp table `winners`, and the rows of other keys
 * pass through a hash anti-join beside them: a window over every row had sorted the whole slice once more
 * before the merge's own sort (in the 5M-row memory bench that took longer than the sort itself). The ranking
 * is a statement of its own, so that its window and the merge's sort never hold memory at the same time.
 * Keys compare with IS NOT DISTINCT FROM, as a window's PARTITION BY does: a NULL key part is a value like any other.
 */
export async function onePerKey(
  conn: DuckDBConnection,
  rows: string,
  keyColumns: readonly string[],
  rank: string,
  temp: { repeated: string; winners: string },
  kept: readonly string[] = [],
): Promise<string> {
  const key = keyColumns.join(', ');
  await conn.run(`CREATE OR REPLACE TEMP TABLE ${temp.repeated} AS SELECT ${key} FROM (${rows}) GROUP BY ${key} HAVING count(*) > 1`);
  if (Number((await conn.runAndReadAll(`SELECT count(*)::BIGINT FROM ${temp.repeated}`)).getRowsJS()[0]![0]) === 0) return rows;
  const on = keyColumns.map((k) => `r.${k} IS NOT DISTINCT FROM d.${k}`).join(' AND ');
  const repeated = `(SELECT r.* FROM (${rows}) r SEMI JOIN ${temp.repeated} d ON ${on})`;
  await conn.run(
    `CREATE OR REPLACE TEMP TABLE ${temp.winners} AS ` +
      (kept.length === 0
        ? `SELECT * FROM ${repeated} QUALIFY row_number() OVER (PARTITION BY ${key} ORDER BY ${rank}) = 1`
        : `SELECT *${keptValues(kept)} FROM ${repeated}
           WINDOW __key AS (PARTITION BY ${key} ORDER BY ${rank} ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
           QUALIFY row_number() OVER __key = 1`),
  );
  return `(SELECT r.* FROM (${rows}) r ANTI JOIN ${temp.repeated} d ON ${on}) UNION ALL (SELECT * FROM ${temp.winners})`;
}

/**
 * Another writer's columns (TableShape.kept) replaced by the newest non-NULL value among the key's rows (window
 * `__key`, framed over all of them): a fresh row never carries one.
 */
const keptValues = (kept: readonly string[]): string =>
  kept.length === 0 ? '' : ` REPLACE (${kept.map((c) => `first_value(${ident(c)} IGNORE NULLS) OVER __key AS ${ident(c)}`).join(', ')})`;

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
  const sources: string[] = [];
  if (opts.existing.length > 0)
    sources.push(
      `SELECT * FROM read_parquet(${literalList(opts.existing)}, hive_partitioning = false, union_by_name = true)${opts.keep ? ` WHERE ${opts.keep}` : ''}`,
    );
  if (opts.fresh) sources.push(opts.fresh);
  const { rows, order } = mergedRows(shape, sources);
  return writeLakeFile(conn, table, shape, partition, rows, opts.target, order);
}

/**
 * The rows of `sources` (relations read by column name) projected onto the shape's declared columns and types,
 * one row per natural key (see writeMergedPartition), as a query, and the order of the shape's files.
 */
export function mergedRows(shape: TableShape, sources: readonly string[]): { rows: string; order: string } {
  const union = [emptyTypedSelect(shape), ...sources].map((s) => `(${s})`).join(' UNION ALL BY NAME ');
  const projection = shape.columns.map((c) => `CAST(${ident(c.name)} AS ${c.type}) AS ${ident(c.name)}`).join(', ');
  const key = shape.key.map(ident).join(', ');
  const order = [...shape.order, ...shape.key.filter((k) => !shape.order.includes(k))].map(ident).join(', ');
  const kept = shape.kept ?? [];
  const rows = `SELECT * EXCLUDE (__rank) FROM (
         SELECT *${keptValues(kept)}, row_number() OVER __key AS __rank
         FROM (SELECT ${projection} FROM (${union}))
         WINDOW __key AS (PARTITION BY ${key} ORDER BY ${keyRank(shape)}${kept.length ? ' ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING' : ''})
       ) WHERE __rank = 1`;
  return { rows, order };
}
