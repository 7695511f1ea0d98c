/**
 * The lake's side of a table merge (merge-table.ts): what one network's partitions of a table hold now. Its own
 * module, importing nothing of the write side, so that the merge does not import the lake's one reader that
 * implements it (LakeState.partitionsOf, lake-state.ts: both committers read through it, a distributed lake's files
 * copied from its store: distributed/lake-rows.ts).
 */

/** A file's lowest and highest block, when the catalog knows them. */
export type BlockSpan = { min: number | null; max: number | null };

/** What one network's partitions of a table hold now, as a merge reads them. */
export interface LakePartitions {
  /** Every current file's partition and block span (which partitions a window fetched again reaches). */
  files(): Promise<readonly { partition: string; span?: BlockSpan }[]>;
  /** Rows a partition holds now (0 for a new one). */
  rowsIn(partition: string): number;
  /**
   * The partitions' current rows that meet `keep` (the shape's columns and STAGED_PARTITION), or undefined when
   * they hold none.
   */
  select(partitions: readonly string[], keep?: string): Promise<string | undefined>;
}
