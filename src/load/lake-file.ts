/**
 * One partition's Parquet file, written the way a DuckLake data file must be: every column of the table in the
 * catalog's order (the partition's `network` and date included, so a file read alone still says where its rows
 * belong), Parquet field ids = the catalog's column ids, and the statistics the catalog records taken from the
 * COPY itself. Its final name is immutable and new (`ducklake-<uuidv7>.parquet`): a snapshot's files never change.
 */
import type { DuckDBConnection } from '@duckdb/node-api';
import { uuidv7 } from '../ducklake/ddl.js';
import { open } from 'node:fs/promises';
import { leafColumns, type LakeColumn } from '../ducklake/reader.js';
import { compareStat, fieldIdsOf, type ColumnStats, type StagedFile } from '../ducklake/writer.js';
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

/** A partition file written to its staging path, not yet measured (see measureLakeFiles). */
export interface CopiedFile {
  target: string;
  table: LakeTableState;
  shape: TableShape;
  partition: { network: string; value: string };
}

/**
 * COPYs `select` (rows with the shape's columns) to `target` as a data file of the table `t` for partition
 * (`network`, `value`), in `order` (columns of the shape) or, without it, in the order `select` returns them.
 */
export async function copyLakeFile(
  conn: DuckDBConnection,
  t: LakeTableState,
  shape: TableShape,
  partition: { network: string; value: string },
  select: string,
  target: string,
  order?: string,
): Promise<CopiedFile> {
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
  await conn.run(
    `COPY (SELECT ${values.join(', ')} FROM (${select})${order ? ` ORDER BY ${order}` : ''}) TO ${literal(target)} (${LAKE_PARQUET}, FIELD_IDS ${fieldIdsOf(t.columns)})`,
  );
  return { target, table: t, shape, partition };
}

/** copyLakeFile, then measureLakeFiles of that one file. */
export async function writeLakeFile(
  conn: DuckDBConnection,
  t: LakeTableState,
  shape: TableShape,
  partition: { network: string; value: string },
  select: string,
  target: string,
  order?: string,
): Promise<LakeFile> {
  const [file] = await measureLakeFiles(conn, [await copyLakeFile(conn, t, shape, partition, select, target, order)]);
  return file!;
}

/**
 * The files as the catalog records them: row counts, sizes and statistics from their Parquet footers, read by
 * one query for all of them (a query per file cost ~1.8 ms of CPU each, ~1 CPU-second of the e2e bench's 556
 * files), and each file's new immutable name in its partition's folder.
 */
export async function measureLakeFiles(conn: DuckDBConnection, files: readonly CopiedFile[]): Promise<LakeFile[]> {
  if (files.length === 0) return [];
  const footers = await footerStats(
    conn,
    files.map((f) => f.target),
  );
  return Promise.all(
    files.map(async (f) => {
      const { table: t, shape, partition } = f;
      const where = `table ${t.table.name}, partition network=${partition.network}/${shape.partition}=${partition.value}`;
      const { rows, stats } = leafStats(footers.get(f.target) ?? [], t.columns, f.target, where);
      const { footerSize, bytes } = await footerOf(f.target, where);
      const relative = `network=${folderValue(partition.network)}/${shape.partition}=${folderValue(partition.value)}/ducklake-${uuidv7()}.parquet`;
      const block = shape.blockColumn ? t.columns.find((c) => c.name === shape.blockColumn) : undefined;
      const blockStats = block ? stats.find((st) => st.columnId === block.columnId) : undefined;
      return {
        staged: {
          tableId: t.table.tableId,
          path: relative,
          fullPath: t.dir + relative,
          recordCount: rows,
          fileSizeBytes: bytes,
          footerSize,
          columnStats: stats,
          partitionValues: [partition.network, partition.value],
        },
        to: t.dir + relative,
        rows,
        minBlock: blockStats?.min ?? null,
        maxBlock: blockStats?.max ?? null,
      };
    }),
  );
}

type ColumnChunk = [rowGroup: number, rows: number, path: string, min: string | null, max: string | null, nulls: number, values: number, bytes: number];

/** Every column chunk of every file's footer, by file. */
async function footerStats(conn: DuckDBConnection, files: readonly string[]): Promise<Map<string, ColumnChunk[]>> {
  const rows = (
    await conn.runAndReadAll(
      `SELECT file_name, row_group_id::BIGINT, row_group_num_rows::BIGINT, path_in_schema, stats_min_value, stats_max_value, stats_null_count::BIGINT,
              num_values::BIGINT, total_compressed_size::BIGINT FROM parquet_metadata([${files.map(literal).join(', ')}])`,
    )
  ).getRowsJS() as [string, bigint, bigint, string, string | null, string | null, bigint | null, bigint, bigint][];
  const out = new Map<string, ColumnChunk[]>();
  for (const [file, rg, n, p, lo, hi, nulls, values, bytes] of rows) {
    const list = out.get(file) ?? [];
    list.push([Number(rg), Number(n), p, lo, hi, Number(nulls ?? 0), Number(values), Number(bytes)]);
    out.set(file, list);
  }
  return out;
}

/**
 * A file's row count and per-leaf-column statistics from its column chunks: the values DuckDB's
 * `COPY ... RETURN_STATS` reports (booleans as 0 and 1, as it does), without its cost — RETURN_STATS put ~70 MB
 * on the 5M-row memory bench's peak (docs/performance.md, "The single-machine lake as a DuckLake"). Row groups
 * are folded: min and max by the column's type, counts and sizes summed. Parquet keeps no NaN flag:
 * contains_nan stays unknown (NULL) for floating-point columns.
 */
function leafStats(chunks: readonly ColumnChunk[], columns: readonly LakeColumn[], file: string, where: string): { rows: number; stats: ColumnStats[] } {
  if (chunks.length === 0) throw new Error(`${where}: ${file} has no column chunks in its footer`);
  const rowGroups = new Map(chunks.map((c) => [c[0], c[1]]));
  const rows = [...rowGroups.values()].reduce((a, b) => a + b, 0);
  // A list's Parquet path has a `list` level between the column and its `element`.
  const key = (names: readonly string[]): string => names.join('\u0000');
  const byPath = new Map<string, ColumnChunk[]>();
  for (const c of chunks) {
    const names = c[2].split(', ').filter((n) => n !== 'list');
    byPath.set(key(names), [...(byPath.get(key(names)) ?? []), c]);
  }
  const stats = leafColumns(columns).flatMap(({ column, path: names }): ColumnStats[] => {
    const parts = byPath.get(key(names));
    if (!parts) {
      if (names.length > 1) return []; // a nested leaf without values in this file: no statistics row
      throw new Error(`${where}: ${file} has no column ${column.name}`);
    }
    const text = (v: string | null): string | null => (v === null ? null : column.type === 'boolean' ? (v === 'true' ? '1' : v === 'false' ? '0' : v) : v);
    let min: string | null = null;
    let max: string | null = null;
    let bounded = true;
    let nullCount = 0;
    let valueCount = 0;
    let size = 0;
    for (const [, , , lo, hi, nulls, values, compressed] of parts) {
      nullCount += nulls;
      valueCount += values;
      size += compressed;
      const a = text(lo);
      const b = text(hi);
      if (a === null || b === null) {
        if (nulls < values) bounded = false;
        continue;
      }
      if (min === null || compareStat(column.type, a, min) < 0) min = a;
      if (max === null || compareStat(column.type, b, max) > 0) max = b;
    }
    return [
      {
        columnId: column.columnId,
        min: bounded ? min : null,
        max: bounded ? max : null,
        nullCount,
        valueCount,
        columnSizeBytes: size,
        containsNan: null,
      },
    ];
  });
  return { rows, stats };
}

/** A file's size and its footer's length (the 4 bytes before the closing magic number). */
async function footerOf(file: string, where: string): Promise<{ footerSize: number; bytes: number }> {
  const handle = await open(file, 'r');
  try {
    const { size } = await handle.stat();
    const tail = Buffer.alloc(8);
    await handle.read(tail, 0, 8, size - 8);
    if (tail.toString('latin1', 4) !== 'PAR1') throw new Error(`${where}: ${file} does not end like a Parquet file`);
    return { footerSize: tail.readUInt32LE(0), bytes: size };
  } finally {
    await handle.close();
  }
}
