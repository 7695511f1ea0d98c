import type { DuckDBConnection } from '@duckdb/node-api';
import { emptyTypedSelect, type TableShape } from './schema.js';
import { ident, LAKE_PARQUET, literal, literalList } from './sql.js';

export interface MergedStats {
  rows: number;
  /** Exact integer text. */
  minBlock: string | null;
  maxBlock: string | null;
}

/** Columns that identify a row's content, for a deterministic pick between rows of one key and one run. */
const contentColumns = (shape: TableShape): string[] => shape.columns.map((c) => c.name).filter((n) => n !== '_run_id' && n !== '_ingested_at');

/**
 * Writes one partition file: (existing files ∪ fresh rows) projected onto the shape's declared columns and
 * types, one row per natural key (the newest `_ingested_at` wins; a content hash breaks ties so the result
 * never depends on read order), sorted, ZSTD. Existing files may be several (strays that `compact` or the
 * next commit folds in) and may predate a column added to the declaration: they are read by name.
 */
export async function writeMergedPartition(
  conn: DuckDBConnection,
  shape: TableShape,
  opts: { existing: readonly string[]; fresh?: string; target: string },
): Promise<MergedStats> {
  const sources = [emptyTypedSelect(shape)];
  if (opts.existing.length > 0) sources.push(`SELECT * FROM read_parquet(${literalList(opts.existing)}, hive_partitioning = false, union_by_name = true)`);
  if (opts.fresh) sources.push(opts.fresh);
  const union = sources.map((s) => `(${s})`).join(' UNION ALL BY NAME ');
  const projection = shape.columns.map((c) => `CAST(${ident(c.name)} AS ${c.type}) AS ${ident(c.name)}`).join(', ');
  const key = shape.key.map(ident).join(', ');
  const tieBreak = `hash(${contentColumns(shape).map(ident).join(', ')})`;
  const order = [...shape.order, ...shape.key.filter((k) => !shape.order.includes(k))].map(ident).join(', ');
  await conn.run(
    `COPY (
       SELECT * EXCLUDE (__rank) FROM (
         SELECT *, row_number() OVER (PARTITION BY ${key} ORDER BY _ingested_at DESC, ${tieBreak}) AS __rank
         FROM (SELECT ${projection} FROM (${union}))
       ) WHERE __rank = 1 ORDER BY ${order}
     ) TO ${literal(opts.target)} (${LAKE_PARQUET})`,
  );
  const block = shape.blockColumn ? ident(shape.blockColumn) : undefined;
  const stats = await conn.runAndReadAll(
    `SELECT count(*)::BIGINT${block ? `, min(${block})::BIGINT, max(${block})::BIGINT` : ''} FROM read_parquet(${literal(opts.target)})`,
  );
  const [n, lo, hi] = stats.getRowsJS()[0] as [bigint, bigint | null | undefined, bigint | null | undefined];
  return { rows: Number(n), minBlock: lo == null ? null : lo.toString(), maxBlock: hi == null ? null : hi.toString() };
}
