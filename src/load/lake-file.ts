/**
 * One partition's Parquet file, written the way a DuckLake data file must be: every column of the table in the
 * catalog's order (the partition's `network` and date included, so a file read alone still says where its rows
 * belong), Parquet field ids = the catalog's column ids, and the statistics the catalog records taken from the
 * COPY itself. Its final name is immutable and new (`ducklake-<uuidv7>.parquet`): a snapshot's files never change.
 */
import type { DuckDBConnection } from '@duckdb/node-api';
import { uuidv7 } from '../ducklake/ddl.js';
import { fieldIdsOf, parseColumnStats, type StagedFile } from '../ducklake/writer.js';
import type { LakeTableState } from './lake-state.js';
import type { TableShape } from './schema.js';
import { ident, LAKE_PARQUET, literal } from './sql.js';

export interface LakeFile {
  /** As the commit records it in the catalog (path relative to the table's directory). */
  staged: StagedFile;
  /** Absolute path the file takes in the lake when the commit is applied. */
  to: string;
  rows: number;
  /** Lowest and highest block number in the file, as exact integer text; null without a block column. */
  minBlock: string | null;
  maxBlock: string | null;
}

/** A partition value as a folder name: dates and network names as they are, anything else URL-encoded. */
const folderValue = (value: string): string => (/^[A-Za-z0-9_.:+-]+$/.test(value) ? value : encodeURIComponent(value));

/**
 * COPYs `select` (rows with the shape's columns) to `target` as a data file of the table `t` for partition
 * (`network`, `value`), in `order` (columns of the shape) or, without it, in the order `select` returns them.
 */
export async function writeLakeFile(
  conn: DuckDBConnection,
  t: LakeTableState,
  shape: TableShape,
  partition: { network: string; value: string },
  select: string,
  target: string,
  order?: string,
): Promise<LakeFile> {
  const declared = new Set(shape.columns.map((c) => c.name));
  // Every column of the table: one an older declaration had and this one dropped stays, as NULL.
  const values = t.columns.map((c) =>
    c.name === 'network'
      ? `${literal(partition.network)} AS network`
      : c.name === shape.partition
        ? `CAST(${literal(partition.value)} AS DATE) AS ${ident(c.name)}`
        : declared.has(c.name)
          ? ident(c.name)
          : `NULL AS ${ident(c.name)}`,
  );
  const reader = await conn.runAndReadAll(
    `COPY (SELECT ${values.join(', ')} FROM (${select})${order ? ` ORDER BY ${order}` : ''}) TO ${literal(target)} (${LAKE_PARQUET}, FIELD_IDS ${fieldIdsOf(t.columns)}, RETURN_STATS)`,
  );
  const row = reader.getRowObjectsJS()[0] as Record<string, unknown> | undefined;
  const where = `table ${t.table.name}, partition network=${partition.network}/${shape.partition}=${partition.value}`;
  if (!row) throw new Error(`${where}: COPY returned no statistics for ${target}`);
  const stats = parseColumnStats(row.column_statistics, t.columns, where);
  const relative = `network=${folderValue(partition.network)}/${shape.partition}=${folderValue(partition.value)}/ducklake-${uuidv7()}.parquet`;
  const block = shape.blockColumn ? t.columns.find((c) => c.name === shape.blockColumn) : undefined;
  const blockStats = block ? stats.find((s) => s.columnId === block.columnId) : undefined;
  const rows = Number(row.count);
  return {
    staged: {
      tableId: t.table.tableId,
      path: relative,
      fullPath: t.dir + relative,
      recordCount: rows,
      fileSizeBytes: Number(row.file_size_bytes),
      footerSize: Number(row.footer_size_bytes),
      columnStats: stats,
      partitionValues: [partition.network, partition.value],
    },
    to: t.dir + relative,
    rows,
    minBlock: blockStats?.min ?? null,
    maxBlock: blockStats?.max ?? null,
  };
}
