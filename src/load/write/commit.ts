import { bugError } from '../../errors.js';
import path from 'node:path';
import type { DatasetDef, Network } from '../../datasets/dataset.js';
import type { BatchRows } from './batch-rows.js';
import { fsyncFile, mkdirDurable } from './durable.js';
import { createUnorderedTempTable, type Engine } from '../engine.js';
import { type SliceHook, type WriterTask } from './merge-slices.js';
import { mergeTable, type TableMergeInput } from './merge-table.js';

export { MERGE_SLICE_ROWS, slicePartitions } from './merge-slices.js';
import type { LakePaths } from '../paths.js';
import type { StagedFile } from '../../ducklake/writer.js';
import { copyLakeFile, measureLakeFiles, type LakeFile } from './lake-file.js';
import { mergeShape, type LakeState } from './lake-state.js';
import { REJECTS_SHAPE, STAGED_PARTITION, datasetShape, noFreshRows, stagedSelect, type StagedPages, type TableShape } from '../schema.js';

export { stagedSelect };
import { ident, literal, literalList } from '../sql.js';
import type { ScopeRange } from './replace.js';
import { testHook } from '../test-hooks.js';

export { REJECTS_DATASET } from '../schema.js';

export interface CommittedFile {
  dataset: string;
  network: Network;
  partition: string;
  /** Path relative to the lake root. */
  path: string;
  rows: number;
  /**
   * Rows of the committing run in the file (the rest were there before): what the run landed, after rows of
   * one key were reduced to one. Absent for files not written by a run's merge.
   */
  runRows?: number;
  bytes: number;
  /** Lowest and highest block number in the file, as exact integer text (BIGINT does not fit a JS number). */
  minBlock: string | null;
  maxBlock: string | null;
}

/** A partition file ready in staging: what to rename where, and what the catalog records of it. */
export interface PreparedFile {
  /** Absolute path of the file under `_staging`. */
  from: string;
  /** Absolute path it takes in the lake: a new, immutable name in the partition's folder. */
  to: string;
  file: CommittedFile;
  /** The DuckLake data file the commit adds; it replaces what the partition held (those files end at the commit's snapshot). */
  staged: StagedFile;
}

/** `from`, written under the commit's work folder as `written`, prepared to become its partition's one current file. */
export function preparedFile(
  paths: LakePaths,
  target: { shape: TableShape; network: Network; partition: string },
  from: string,
  written: LakeFile,
  runRows?: number,
): PreparedFile {
  return {
    from,
    to: written.to,
    staged: written.staged,
    file: {
      dataset: target.shape.name,
      network: target.network,
      partition: target.partition,
      path: paths.relative(written.to),
      rows: written.rows,
      ...(runRows === undefined ? {} : { runRows }),
      bytes: written.staged.fileSizeBytes,
      minBlock: written.minBlock,
      maxBlock: written.maxBlock,
    },
  };
}

export interface PrepareInput {
  engine: Engine;
  paths: LakePaths;
  /** The lake's tables and current files (the dataset's table included). */
  lake: LakeState;
  def: DatasetDef;
  network: Network;
  runId: string;
  ingestedAt: string;
  /** Staged NDJSON files (non-empty) of windows that completed. */
  stagedFiles: string[];
  /** Pages staged as received (non-empty files) of windows that completed. */
  pageFiles?: readonly StagedPages[];
  /** The same staged files, already typed while the run fetched (see BatchRows), by the batches they were typed in. */
  preloaded?: readonly BatchRows[];
  /** Connections writing partition files at once (default COPY_CONNECTIONS). */
  writers?: number;
  /** Fresh rows merged at once (default MERGE_SLICE_ROWS). */
  sliceRows?: number;
  /** A fresh folder under the run's staging folder for this commit's intermediate files. */
  workDir: string;
  /** Rows derived from each merged slice, written beside the dataset's files (see SliceDerivation). */
  derive?: SliceDerivation;
  /** Windows of this commit fetched again: their old rows are replaced by what they brought (load/write/replace.ts). */
  replacing?: readonly ScopeRange[];
}

/**
 * Rows derived from a dataset's commit (decoded events from event_logs: decode/in-commit.ts), from the merge's
 * sorted slices (see SliceHook), with the lake's current files of the tables they write.
 */
export interface SliceDerivation {
  /** The tables it writes: created before the commit writes anything, when the lake lacks them. */
  readonly shapes: readonly TableShape[];
  slice(table: string, partitions: readonly string[], index: number, replaced: boolean, lake: LakeState): { first: WriterTask[]; then: WriterTask[] };
}

/**
 * Merges one partition (its current files and `fresh`, a relation of the shape's columns on the engine's own
 * connection) into a file under `workDir` and fsyncs it, so that once the commit is decided the file is on disk
 * whatever happens next. `keep`: a condition the partition's current rows must meet to stay.
 */
export async function preparePartition(
  engine: Engine,
  paths: LakePaths,
  lake: LakeState,
  shape: TableShape,
  network: Network,
  partition: string,
  fresh: string | undefined,
  workDir: string,
  keep?: string,
): Promise<PreparedFile> {
  const part = ident(STAGED_PARTITION);
  const rows = fresh ? `(SELECT *, ${literal(partition)} AS ${part} FROM (${fresh}))` : noFreshRows(shape);
  const prepared = await mergeOnePartition({ engine, paths, lake, shape, network, partition, workDir, keep }, rows);
  // Its callers merge rows into it (decoded, reconciled): a partition left with none is compaction's (rewritePartition).
  if (prepared.length !== 1) throw bugError(`${shape.name} (${network}, ${partition}): the merge left no row to write`);
  return prepared[0]!;
}

/**
 * A partition merged with no fresh row, its current rows kept where they meet `keep` (all of them without one): a
 * file, or the partition cleared when no row stays (another DuckLake writer deleted them all).
 */
export async function rewritePartition(p: OnePartition): Promise<PreparedFile | ClearedPartition> {
  const prepared = await mergeOnePartition(p, noFreshRows(p.shape));
  return prepared[0] ?? prepared.cleared?.[0] ?? { table: p.shape.name, partitionValues: [p.network, p.partition] };
}

/** One partition of one table of a single-machine commit, and the condition its current rows must meet to stay. */
export interface OnePartition {
  engine: Engine;
  paths: LakePaths;
  lake: LakeState;
  shape: TableShape;
  network: Network;
  partition: string;
  workDir: string;
  keep?: string;
}

/** One partition merged with `fresh` (rows with STAGED_PARTITION), its current rows kept where they meet `keep`. */
function mergeOnePartition(p: OnePartition, fresh: string): Promise<PreparedDataset> {
  const { partition, keep, ...rest } = p;
  return prepareMerged({ ...rest, conn: p.engine.conn, fresh, partitions: [partition], ...(keep ? { keep } : {}) });
}

/** One table's merge of a single-machine commit: mergeTable over the lake's files, each partition's file written under the work folder. */
interface MergedInput extends Omit<TableMergeInput<unknown>, 'lake' | 'name' | 'write' | 'derive'> {
  paths: LakePaths;
  lake: LakeState;
  network: Network;
  workDir: string;
  derive?: SliceDerivation;
}

/**
 * Merges `fresh` into the partitions it (and the windows fetched again, and `partitions`) reach, each partition's
 * file written under `workDir/final` and fsynced, measured for the catalog. A partition every row of which went
 * (a replaced window's, none fetched again) has no file: it is cleared.
 */
async function prepareMerged(input: MergedInput): Promise<PreparedDataset> {
  const { paths, lake, network, workDir, derive, ...declared } = input;
  const lakeTable = lake.table(declared.shape.name);
  // Columns another writer added to the table are merged and written with their values.
  const merge = { ...declared, shape: mergeShape(declared.shape, lakeTable) };
  const { shape, conn } = merge;
  const finalDir = path.join(workDir, 'final');
  await mkdirDurable(finalDir);
  const copied = await mergeTable({
    ...merge,
    name: `${shape.name}_${network}`,
    lake: lake.partitionsOf(shape, network),
    ...(derive
      ? { derive: { slice: (table, partitions, index, replaced) => derive.slice(table, partitions, index, replaced, lake) } satisfies SliceHook }
      : {}),
    // A partition whose rows all went (a replaced window's) is written empty: it still replaces its old files.
    write: async (c, partition, rows) => ({
      file: await copyLakeFile(
        c,
        lakeTable,
        shape,
        { network, value: partition },
        rows.select,
        path.join(finalDir, `${shape.name}.${network}.${partition}.parquet`),
      ),
      runRows: rows.runRows,
    }),
  });
  const kept = copied.filter((c) => c.file.rows > 0);
  // A partition that held nothing and is left with nothing is not the catalog's business.
  const cleared = copied
    .filter((c) => c.file.rows === 0 && lake.files(shape.name, network, c.file.partition.value).length > 0)
    .map((c) => ({ table: shape.name, partitionValues: [network, c.file.partition.value] }));
  const measured = await measureLakeFiles(
    conn,
    kept.map((c) => c.file),
  );
  const out = measured.map((m, i) =>
    preparedFile(
      paths,
      { shape, network, partition: kept[i]!.file.partition.value },
      kept[i]!.file.target,
      m,
      input.runId === undefined ? undefined : kept[i]!.runRows,
    ),
  );
  await Promise.all(out.map((f) => fsyncFile(f.from)));
  await testHook('final');
  return Object.assign(out, { cleared });
}

/** A dataset's files ready in staging, and the partitions whose every row went (their files end with none in their place). */
/** A partition whose every row went: its files end with none in their place (`partitionValues`: network, value). */
export interface ClearedPartition {
  table: string;
  partitionValues: string[];
}

export type PreparedDataset = PreparedFile[] & { cleared?: ClearedPartition[] };

/**
 * Types a dataset's staged rows and merges them with what the touched partitions hold (mergeTable, the merge
 * of both committers), each partition's file written under the commit's work folder and fsynced. Nothing in
 * the lake changes here.
 */
export async function prepareDataset(input: PrepareInput): Promise<PreparedDataset> {
  const { engine, paths, def, network, runId, ingestedAt, stagedFiles, workDir } = input;
  const pageFiles = input.pageFiles ?? [];
  const replacing = input.replacing ?? [];
  const shape = datasetShape(def);
  // Windows fetched again whose rows are all gone bring no fresh row, yet their old rows must go.
  const none = noFreshRows(shape);
  let noFresh = stagedFiles.length === 0 && pageFiles.length === 0;
  if (noFresh && replacing.length === 0) return [];
  const typed = input.preloaded && !noFresh ? (await Promise.all(input.preloaded.map((b) => b.typedFiles(def)))).flat() : undefined;
  if (typed && typed.length === 0) {
    if (replacing.length === 0) return [];
    noFresh = true;
  }
  const preloaded = noFresh ? none : typed ? `read_parquet(${literalList(typed)})` : undefined;
  // A connection of its own: the datasets of a commit are prepared side by side (see commitRun).
  const conn = await engine.connect();
  const freshTable = ident('__chainlake_fresh');
  const fresh = preloaded ?? freshTable;
  try {
    // The rows' order matters nowhere here: they are reduced by key (by content, never by read order) and sorted.
    if (!preloaded) await createUnorderedTempTable(conn, freshTable, stagedSelect(def, runId, ingestedAt, stagedFiles, pageFiles));
    await testHook('typed');
    return await prepareMerged({
      engine,
      conn,
      paths,
      lake: input.lake,
      shape,
      network,
      fresh,
      workDir,
      def,
      replacing,
      runId,
      ...(input.writers === undefined ? {} : { writers: input.writers }),
      ...(input.sliceRows === undefined ? {} : { sliceRows: input.sliceRows }),
      ...(input.derive ? { derive: input.derive } : {}),
    });
  } finally {
    try {
      await conn.run(`DROP TABLE IF EXISTS ${freshTable}`);
    } finally {
      conn.closeSync();
    }
  }
}

/** The typed rows of staged reject files of one network, with the REJECTS_SHAPE columns. */
export function rejectsSelect(stagedFiles: readonly string[], network: Network, runId: string, ingestedAt: string): string {
  return `SELECT dataset, "window", field, raw_value, reason, CAST(entry AS JSON) AS entry, ${literal(runId)} AS _run_id, CAST(${literal(ingestedAt)} AS TIMESTAMPTZ) AS _ingested_at
    FROM read_json(${literalList(stagedFiles)}, format='newline_delimited',
         columns={'dataset': 'VARCHAR', 'network': 'VARCHAR', 'window': 'VARCHAR', 'field': 'VARCHAR', 'raw_value': 'VARCHAR', 'reason': 'VARCHAR', 'entry': 'VARCHAR'})
    WHERE network = ${literal(network)}`;
}

/** Rejects a commit replaces: a condition the `_rejects` rows it keeps meet, and the days holding those it drops. */
export interface ReplacedRejects {
  keep: string;
  days: readonly string[];
}

/** The `_rejects` partitions a commit writes, and those it leaves without a row (the catalog drops their files). */
export interface PreparedRejects {
  files: PreparedFile[];
  cleared: { table: string; partitionValues: string[] }[];
}

/**
 * Rejects join the day's log partition of `_rejects` (one file per network and run date, the day of `ingestedAt`, merged): the staged
 * ones, and `more` (a relation with the REJECTS_SHAPE columns: rejects derived in the same commit). With
 * `replaced`, each day holding a reject it replaces is rewritten without those (the day's own too), so that
 * deriving the same rows again (a decoding of logs fetched again) replaces its rejects instead of adding them.
 */
export async function prepareRejects(input: Omit<PrepareInput, 'def'> & { more?: string; replaced?: ReplacedRejects }): Promise<PreparedRejects> {
  const { engine, paths, lake, network, runId, ingestedAt, stagedFiles, workDir, replaced } = input;
  const date = ingestedAt.slice(0, 10);
  const sources = [...(stagedFiles.length ? [rejectsSelect(stagedFiles, network, runId, ingestedAt)] : []), ...(input.more ? [input.more] : [])];
  if (sources.length === 0 && !replaced?.days.length) return { files: [], cleared: [] };
  const part = ident(STAGED_PARTITION);
  const fresh = sources.length
    ? `(SELECT *, ${literal(date)} AS ${part} FROM (${sources.map((s) => `(${s})`).join(' UNION ALL BY NAME ')}))`
    : noFreshRows(REJECTS_SHAPE);
  const prepared = await prepareMerged({
    engine,
    conn: engine.conn,
    paths,
    lake,
    shape: REJECTS_SHAPE,
    network,
    fresh,
    workDir,
    partitions: replaced?.days ?? [],
    ...(replaced ? { keep: replaced.keep } : {}),
  });
  return { files: [...prepared], cleared: prepared.cleared ?? [] };
}
