/**
 * The one writer of a DuckLake data file, for the single-machine commit (src/load/write/lake-file.ts) and the
 * distributed committer (src/distributed/commit.ts) alike, so that both modes write the same Parquet: the COPY
 * options (LAKE_PARQUET), the projection (every column of the table in the catalog's order, cast to the
 * catalog's type, Parquet field ids = column ids) and the statistics the catalog records, read from the files'
 * footers. A file's name is immutable and new (`ducklake-<uuidv7>.parquet`): a snapshot's files never change.
 */
import { open, mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import type { DuckDBConnection } from '@duckdb/node-api';
import { DuckLakeError } from './catalog-db.js';
import { ident, uuidv7 } from './ddl.js';
import { leafColumns, tablePath, type LakeColumn, type LakeTable } from './reader.js';
import { duckdbTypeOfTree } from './types.js';
import type { ColumnStats, StagedFile } from './staged-file.js';

/**
 * COPY options of every data file. ZSTD level 1 and Parquet format version 2 (delta and byte-stream-split
 * encodings; DuckDB still writes version 1 data page headers): fewer bytes and less CPU than the defaults on
 * these sorted columns (docs/performance.md, "Lake files"). DuckDB, Arrow, Polars, Spark 3.3+ and Trino read
 * it; `test/load/interop.test.ts` reads every file with hyparquet. Row groups: DuckDB's default size.
 */
export const LAKE_PARQUET = 'FORMAT parquet, COMPRESSION zstd, COMPRESSION_LEVEL 1, PARQUET_VERSION V2';

const literal = (text: string): string => `'${text.replace(/'/g, "''")}'`;

/** A partition value as a folder name: dates and network names as they are, anything else URL-encoded. */
export const hiveValue = (value: string): string => (/^[A-Za-z0-9_.:+-]+$/.test(value) ? value : encodeURIComponent(value));

/** The rows of one data file, and where each of the table's columns comes from. */
export interface DataFileRows {
  /** A query returning the rows. */
  readonly sql: string;
  /**
   * The table's columns the query returns, by name; any other column is written as NULL (one an older
   * declaration had and the current one dropped). Default: every column.
   */
  readonly present?: ReadonlySet<string>;
  /** Columns of one value in every row (a partition's), as text: that value instead of the query's. */
  readonly constants?: Readonly<Record<string, string>>;
  /** ORDER BY over the file's columns; without it, the rows come in the order the query returns them. */
  readonly order?: string;
}

/** The COPY's query: every column of the table in the catalog's order, as the catalog's type. */
export function dataFileSelect(columns: readonly LakeColumn[], rows: DataFileRows, where: string): string {
  const values = columns.map((c) => {
    const type = duckdbTypeOfTree(c, `${where}, column ${c.name}`);
    const constant = rows.constants?.[c.name];
    const value = constant !== undefined ? literal(constant) : !rows.present || rows.present.has(c.name) ? ident(c.name) : 'NULL';
    return `CAST(${value} AS ${type}) AS ${ident(c.name)}`;
  });
  return `SELECT ${values.join(', ')} FROM (${rows.sql})${rows.order ? ` ORDER BY ${rows.order}` : ''}`;
}

/** COPY's FIELD_IDS option value: each column's id; nested columns carry theirs in __duckdb_field_id and their children's by name (list: element). */
export function fieldIdsOf(columns: readonly LakeColumn[]): string {
  const fieldId = (c: LakeColumn): string =>
    c.children.length ? `{__duckdb_field_id: ${c.columnId}, ${c.children.map((k) => `${ident(k.name)}: ${fieldId(k)}`).join(', ')}}` : String(c.columnId);
  return `{${columns.map((c) => `${ident(c.name)}: ${fieldId(c)}`).join(', ')}}`;
}

/** Writes `rows` to `target` as a data file of a table with `columns`; returns how many rows it holds. */
export async function copyDataFile(conn: DuckDBConnection, columns: readonly LakeColumn[], rows: DataFileRows, target: string, where: string): Promise<number> {
  const result = await conn.runAndReadAll(
    `COPY (${dataFileSelect(columns, rows, where)}) TO ${literal(target)} (${LAKE_PARQUET}, FIELD_IDS ${fieldIdsOf(columns)})`,
  );
  const [[count] = []] = result.getRowsJS();
  return Number(count ?? 0);
}

/** A written data file as the catalog records it. */
export interface MeasuredFile {
  rows: number;
  bytes: number;
  footerSize: number;
  columnStats: ColumnStats[];
}

/**
 * The files' row counts, sizes and statistics from their Parquet footers, in the order given: read by one query
 * for all of them, as a query per file was a visible share of a large commit's CPU.
 */
export async function measureDataFiles(
  conn: DuckDBConnection,
  files: readonly { path: string; columns: readonly LakeColumn[]; where: string }[],
): Promise<MeasuredFile[]> {
  if (files.length === 0) return [];
  const footers = await footerStats(
    conn,
    files.map((f) => f.path),
  );
  return Promise.all(
    files.map(async (f) => {
      const { rows, stats } = leafStats(footers.get(f.path) ?? [], f.columns, f.path, f.where);
      const { footerSize, bytes } = await footerOf(f.path, f.where);
      return { rows, bytes, footerSize, columnStats: stats };
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
 * `COPY ... RETURN_STATS` reports (booleans as 0 and 1, as it does), without its cost: RETURN_STATS raised the
 * memory bench's peak past its target (docs/performance.md, "The single-machine lake as a DuckLake"). Row groups
 * are folded: min and max by the column's type, counts and sizes summed. Parquet keeps no NaN flag:
 * contains_nan stays unknown (NULL) for floating-point columns, and DuckDB writes no min or max for a column
 * chunk holding a NaN, so such a column's bounds are unknown too.
 */
function leafStats(chunks: readonly ColumnChunk[], columns: readonly LakeColumn[], file: string, where: string): { rows: number; stats: ColumnStats[] } {
  if (chunks.length === 0) throw new DuckLakeError(`${where}: ${file} has no column chunks in its footer`);
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
      throw new DuckLakeError(`${where}: ${file} has no column ${column.name}`);
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
    if (tail.toString('latin1', 4) !== 'PAR1') throw new DuckLakeError(`${where}: ${file} does not end like a Parquet file`);
    return { footerSize: tail.readUInt32LE(0), bytes: size };
  } finally {
    await handle.close();
  }
}

/** Orders two statistics values of a DuckLake type: numerically for numbers, as text otherwise (ISO dates sort). */
export function compareStat(type: string, a: string, b: string): number {
  const numeric = /^(u?int\d+|decimal|float\d+)/.test(type);
  if (!numeric) return a < b ? -1 : a > b ? 1 : 0;
  const special = (v: string) => (v === 'inf' ? Infinity : v === '-inf' ? -Infinity : null);
  const sa = special(a);
  const sb = special(b);
  if (sa !== null || sb !== null) return (sa ?? Number(a)) - (sb ?? Number(b));
  // Exact decimal comparison on the text: integers of any size, decimals with a fractional part.
  const parse = (v: string) => {
    const neg = v.startsWith('-');
    const [int = '0', frac = ''] = v.replace(/^[-+]/, '').split('.');
    return { neg, int: int.replace(/^0+(?=\d)/, ''), frac: frac.replace(/0+$/, '') };
  };
  const x = parse(a);
  const y = parse(b);
  if (x.neg !== y.neg) return x.neg ? -1 : 1;
  const sign = x.neg ? -1 : 1;
  if (x.int.length !== y.int.length) return sign * (x.int.length - y.int.length);
  const width = Math.max(x.frac.length, y.frac.length);
  const xs = x.int + x.frac.padEnd(width, '0');
  const ys = y.int + y.frac.padEnd(width, '0');
  return sign * (xs < ys ? -1 : xs > ys ? 1 : 0);
}

export interface WriteTarget {
  /** The lake's data path (ducklake_metadata.data_path); a local directory for now. */
  readonly dataPath: string;
  readonly table: LakeTable;
  /** The table's columns at the snapshot written against (reader.listColumns). */
  readonly columns: readonly LakeColumn[];
}

/** A data file of a table written under its immutable name (copyTableFile), not yet measured (measureTableFiles). */
export interface CopiedTableFile {
  readonly tableId: number;
  /** The file's path relative to the table's directory, as the catalog records it. */
  readonly path: string;
  readonly fullPath: string;
  readonly columns: readonly LakeColumn[];
  /** Its partition's values by partition column name, which every row must hold. */
  readonly partition?: Readonly<Record<string, string>>;
  readonly where: string;
}

/**
 * Writes `rows` (a query returning every column, or DataFileRows) as one data file of the table under an
 * immutable name, in `col=value/` directories for a partition; null (and no file) when there is no row. The file
 * is measured by measureTableFiles, with the others a commit writes.
 */
export async function copyTableFile(
  duck: DuckDBConnection,
  target: WriteTarget,
  rows: string | DataFileRows,
  partition?: Readonly<Record<string, string>>,
): Promise<CopiedTableFile | null> {
  const { table, columns } = target;
  const where = `table ${table.schema.name}.${table.name}`;
  const dirs = Object.entries(partition ?? {}).map(([name, value]) => {
    if (!columns.some((c) => c.name === name)) throw new DuckLakeError(`${where}: partition column ${name} is not a column`);
    return `${name}=${hiveValue(value)}/`;
  });
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(target.dataPath)) {
    throw new DuckLakeError(`${where}: data path ${target.dataPath} is object storage; this writer writes local paths only so far`);
  }
  const relative = `${dirs.join('')}ducklake-${uuidv7()}.parquet`;
  const fullPath = tablePath(target.dataPath, table) + relative;
  await mkdir(path.dirname(fullPath), { recursive: true });
  const count = await copyDataFile(duck, columns, typeof rows === 'string' ? { sql: rows } : rows, fullPath, where);
  if (count === 0) {
    await rm(fullPath, { force: true });
    return null;
  }
  return { tableId: table.tableId, path: relative, fullPath, columns, ...(partition ? { partition } : {}), where };
}

/**
 * The files as the catalog records them, in the order given, with their statistics read from their footers in one
 * query (measureDataFiles: a query per file was a visible share of a commit of many partitions). Every row of a
 * partition's file must belong to it, as its statistics show: if a file holds rows of another, the error names its
 * partition and every file given is removed (they are one commit's, which cannot go ahead).
 */
export async function measureTableFiles(duck: DuckDBConnection, files: readonly CopiedTableFile[]): Promise<StagedFile[]> {
  try {
    const measured = await measureDataFiles(
      duck,
      files.map((f) => ({ path: f.fullPath, columns: f.columns, where: f.where })),
    );
    return files.map((f, i) => {
      const m = measured[i]!;
      return {
        tableId: f.tableId,
        path: f.path,
        fullPath: f.fullPath,
        recordCount: m.rows,
        fileSizeBytes: m.bytes,
        footerSize: m.footerSize,
        columnStats: m.columnStats,
        partitionValues: f.partition ? partitionValuesOf(f, m.columnStats) : null,
      };
    });
  } catch (e) {
    await Promise.all(files.map((f) => rm(f.fullPath, { force: true })));
    throw e;
  }
}

/** The partition's values of a file whose statistics show every row holds them. */
function partitionValuesOf(file: CopiedTableFile, stats: readonly ColumnStats[]): string[] {
  return Object.entries(file.partition!).map(([name, value]) => {
    const column = file.columns.find((c) => c.name === name)!;
    const s = stats.find((x) => x.columnId === column.columnId);
    if (!s || s.nullCount > 0 || s.min !== value || s.max !== value)
      throw new DuckLakeError(
        `${file.where}: rows written for partition ${name}=${value} hold ${name} values from ${s?.min} to ${s?.max} (${s?.nullCount} NULL)`,
      );
    return value;
  });
}

/**
 * One data file written (copyTableFile) and measured (measureTableFiles) on its own, with its statistics; null
 * (and no file) when there is no row. With `partition` (values by partition column name), every row must belong
 * to it: checked from the file's statistics, the file removed if not.
 */
export async function writeDataFile(...args: Parameters<typeof copyTableFile>): Promise<StagedFile | null> {
  const [duck] = args;
  const copied = await copyTableFile(...args);
  if (!copied) return null;
  const [file] = await measureTableFiles(duck, [copied]);
  return file!;
}
