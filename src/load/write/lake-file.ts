/**
 * One partition's Parquet file of the single-machine lake, written by the DuckLake data-file writer both modes
 * use (src/ducklake/data-file.ts): every column of the table in the catalog's order (the partition's `network`
 * and date included, so a file read alone still says where its rows belong), field ids = the catalog's column
 * ids, statistics from its footer. It is written to a staging path; its final name is immutable and new
 * (`ducklake-<uuidv7>.parquet`): a snapshot's files never change.
 */
import type { DuckDBConnection } from '@duckdb/node-api';
import { copyDataFile, hiveValue, measureDataFiles } from '../../ducklake/data-file.js';
import { uuidv7 } from '../../ducklake/ddl.js';
import type { StagedFile } from '../../ducklake/writer.js';
import type { LakeTableState } from './lake-state.js';
import type { TableShape } from '../schema.js';

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

/** A partition file written to its staging path, not yet measured (see measureLakeFiles). */
export interface CopiedFile {
  target: string;
  table: LakeTableState;
  shape: TableShape;
  partition: { network: string; value: string };
  /** Rows written: 0 for a partition every row of which went (its file is no data file; the partition is cleared). */
  rows: number;
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
  const rows = await copyDataFile(
    conn,
    t.columns,
    {
      sql: select,
      // A column of the table the shape lacks stays, as NULL (a merge's shape has them: mergeShape).
      present: new Set(shape.columns.map((c) => c.name)),
      constants: { network: partition.network, [shape.partition]: partition.value },
      order,
    },
    target,
    where(t, shape, partition),
  );
  return { target, table: t, shape, partition, rows };
}

/** copyLakeFile, then measureLakeFiles of that one file. */
export async function writeLakeFile(...args: Parameters<typeof copyLakeFile>): Promise<LakeFile> {
  const [file] = await measureLakeFiles(args[0], [await copyLakeFile(...args)]);
  return file!;
}

const where = (t: LakeTableState, shape: TableShape, p: { network: string; value: string }): string =>
  `table ${t.table.name}, partition network=${p.network}/${shape.partition}=${p.value}`;

/**
 * The files as the catalog records them: row counts, sizes and statistics from their Parquet footers (one query
 * for all of them), and each file's new immutable name in its partition's folder.
 */
export async function measureLakeFiles(conn: DuckDBConnection, files: readonly CopiedFile[]): Promise<LakeFile[]> {
  const measured = await measureDataFiles(
    conn,
    files.map((f) => ({ path: f.target, columns: f.table.columns, where: where(f.table, f.shape, f.partition) })),
  );
  return files.map((f, i) => {
    const { table: t, shape, partition } = f;
    const { rows, bytes, footerSize, columnStats } = measured[i]!;
    const relative = `network=${hiveValue(partition.network)}/${shape.partition}=${hiveValue(partition.value)}/ducklake-${uuidv7()}.parquet`;
    const block = shape.blockColumn ? t.columns.find((c) => c.name === shape.blockColumn) : undefined;
    const blockStats = block ? columnStats.find((st) => st.columnId === block.columnId) : undefined;
    return {
      staged: {
        tableId: t.table.tableId,
        path: relative,
        fullPath: t.dir + relative,
        recordCount: rows,
        fileSizeBytes: bytes,
        footerSize,
        columnStats,
        partitionValues: [partition.network, partition.value],
      },
      to: t.dir + relative,
      rows,
      minBlock: blockStats?.min ?? null,
      maxBlock: blockStats?.max ?? null,
    };
  });
}
