/** What a written data file tells the catalog: the shape data-file.ts produces and writer.ts commits. */
export interface ColumnStats {
  readonly columnId: number;
  readonly min: string | null;
  readonly max: string | null;
  readonly nullCount: number;
  readonly valueCount: number;
  readonly columnSizeBytes: number | null;
  readonly containsNan: boolean | null;
}

/** A Parquet file written for a table and not yet committed: nothing reads it until a snapshot lists it. */
export interface StagedFile {
  readonly tableId: number;
  /** Path relative to the table's directory, as stored in ducklake_data_file.path. */
  readonly path: string;
  readonly fullPath: string;
  readonly recordCount: number;
  readonly fileSizeBytes: number;
  readonly footerSize: number;
  readonly columnStats: readonly ColumnStats[];
  /** Partition values by partition key index (identity transform), or null for an unpartitioned table. */
  readonly partitionValues: readonly string[] | null;
}
