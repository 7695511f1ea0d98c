/**
 * One table's merge, as both committers do it (the single machine's commit, load/write/commit.ts, and the
 * distributed one, distributed/commit.ts): which partitions of one network a commit merges (those its fresh rows
 * reach, those a window fetched again reaches, those the caller names), what of their current rows stays (the
 * replaced windows' old rows go: load/write/replace.ts; a caller's condition), and the sliced merge itself
 * (mergeSlices). What differs between the committers is only how the lake's files reach the machine (LakePartitions,
 * read by LakeState for both) and where a partition's file goes (`write`).
 */
import type { DuckDBConnection } from '@duckdb/node-api';
import type { DatasetDef } from '../../datasets/dataset.js';
import type { Engine } from '../engine.js';
import { STAGED_PARTITION, type TableShape } from '../schema.js';
import { ident } from '../sql.js';
import { mergeSlices, type PartitionRows, type SliceHook } from './merge-slices.js';
import { keptRows, partitionsReaching, type KeptRows, type ScopeRange } from './replace.js';
import type { LakePartitions } from './lake-partitions.js';

export interface TableMergeInput<F> {
  engine: Engine;
  /** The connection `fresh` lives on (a temp table of it may): the merge's statements run there. */
  conn: DuckDBConnection;
  shape: TableShape;
  /** Distinguishes the merge tables of merges run side by side. */
  name: string;
  /** A relation of the fresh rows (the shape's columns and STAGED_PARTITION). */
  fresh: string;
  lake: LakePartitions;
  /** The dataset, when windows of it fetched again are replaced (a derived table replaces none). */
  def?: DatasetDef;
  /** Windows fetched again: their old rows go, the partitions they reach are merged (load/write/replace.ts). */
  replacing?: readonly ScopeRange[];
  /** Partitions merged though no fresh row reaches them (a re-decoding's rejects, compaction). */
  partitions?: readonly string[];
  /** A condition the merged partitions' current rows must meet to stay. */
  keep?: string;
  runId?: string;
  writers?: number;
  sliceRows?: number;
  derive?: SliceHook;
  write(writer: DuckDBConnection, partition: string, rows: PartitionRows): Promise<F>;
}

/** Merges a table's fresh rows into the partitions they and the replaced windows reach; what `write` gave, in partition order. */
export async function mergeTable<F>(input: TableMergeInput<F>): Promise<F[]> {
  const { conn, lake } = input;
  const replacing = input.replacing ?? [];
  const counts = await freshCounts(conn, input.fresh);
  const more = new Set(input.partitions ?? []);
  if (input.def && replacing.length > 0) for (const p of partitionsReaching(input.def, await lake.files(), replacing)) more.add(p);
  for (const p of more) if (!counts.has(p)) counts.set(p, 0);
  if (counts.size === 0) return [];
  const kept: KeptRows | undefined = input.def ? await keptRows(conn, input.def, replacing) : undefined;
  try {
    const keeps = [...(kept ? [kept.condition] : []), ...(input.keep ? [input.keep] : [])];
    const keep = keeps.length ? keeps.map((k) => `(${k})`).join(' AND ') : undefined;
    const partitions = [...counts].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return await mergeSlices({
      engine: input.engine,
      conn,
      shape: input.shape,
      name: input.name,
      fresh: input.fresh,
      // Each partition's fresh rows plus the rows it holds: counting fresh rows alone let a late commit of a large
      // export merge slices of several times the slice size (every commit rewrites the day partitions the earlier
      // ones wrote).
      partitions: partitions.map(([p, n]) => [p, n + lake.rowsIn(p)] as const),
      existing: (slice) => lake.select(slice, keep),
      ...(input.runId === undefined ? {} : { runId: input.runId }),
      ...(input.writers === undefined ? {} : { writers: input.writers }),
      ...(input.sliceRows === undefined ? {} : { sliceRows: input.sliceRows }),
      ...(input.derive ? { derive: input.derive, replaced: kept !== undefined } : {}),
      write: input.write,
    });
  } finally {
    await kept?.drop().catch(() => undefined);
  }
}

/** Fresh rows per partition. */
async function freshCounts(conn: DuckDBConnection, fresh: string): Promise<Map<string, number>> {
  const part = ident(STAGED_PARTITION);
  const rows = (await conn.runAndReadAll(`SELECT ${part}, count(*)::BIGINT FROM ${fresh} GROUP BY 1`)).getRowsJS() as [string, bigint][];
  return new Map(rows.map(([p, n]) => [p, Number(n)]));
}
