import type { DuckDBConnection } from '@duckdb/node-api';
import path from 'node:path';
import type { DatasetDef, Network } from '../../datasets/dataset.js';
import type { BatchRows } from './batch-rows.js';
import { fsyncFile, mkdirDurable } from './durable.js';
import { createUnorderedTempTable, type Engine } from '../engine.js';
import { keyRank, onePerKey, writeMergedPartition } from './merge.js';
import type { LakePaths } from '../paths.js';
import type { StagedFile } from '../../ducklake/writer.js';
import { copyLakeFile, measureLakeFiles, type CopiedFile, type LakeFile } from './lake-file.js';
import type { LakeState } from './lake-state.js';
import { REJECTS_SHAPE, STAGED_PARTITION, datasetShape, emptyTypedSelect, stagedSelect, type StagedPages, type TableShape } from '../schema.js';

export { stagedSelect };
import { ident, literal, literalList } from '../sql.js';
import { keptRowsCondition, partitionsReaching, type ScopeRange } from './replace.js';
import { testHook } from '../test-hooks.js';
import { eachBounded } from '../bounded.js';

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

/** Name of the merged slice's column saying a row is the commit's own (typed from its staged files), not a row the partition held. */
export const FRESH_COLUMN = '__fresh';

/**
 * Rows derived from a dataset's commit (decoded events from event_logs: decode/in-commit.ts), prepared from
 * the merge's sorted slices instead of from rows read again: each slice table is sorted by partition then the
 * dataset's order, and says which rows are the commit's own (FRESH_COLUMN). The tasks `slice` gives for a
 * slice run on the partition writers while the next slice is merged (so that deriving does not hold up the
 * merge), `first` before the slice's own files and `then` after them, and end before that table is reused.
 * Whatever they prepare is the derivation's to report (the caller puts it in the journal).
 */
export interface SliceDerivation {
  /** The tables it writes: created before the commit writes anything, when the lake lacks them. */
  readonly shapes: readonly TableShape[];
  slice(table: string, partitions: readonly string[], index: number, lake: LakeState): { first: WriterTask[]; then: WriterTask[] };
}

/** Work for one of the partition writers' connections. */
export type WriterTask = (writer: DuckDBConnection) => Promise<void>;

/**
 * Merges one partition (its current files and `fresh`, a relation of the shape's columns) into a file under
 * `workDir` and fsyncs it, so that once the commit is decided the file is on disk whatever happens next.
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
  const existing = lake.files(shape.name, network, partition).map((f) => f.path);
  const from = path.join(workDir, `${shape.name}.${network}.${partition}.parquet`);
  const written = await writeMergedPartition(
    engine.conn,
    lake.table(shape.name),
    shape,
    { network, value: partition },
    { existing, fresh, target: from, keep },
  );
  await fsyncFile(from);
  await testHook('final');
  return preparedFile(paths, { shape, network, partition }, from, written);
}

/** A partition's rows in a sorted merge table: its row-id range, and the rows of the committing run in it. */
interface PartitionRun {
  lo: bigint;
  hi: bigint;
  /** Rows of the committing run (its `_run_id`) in the partition. */
  runRows: number;
}

/** Connections writing a batch's partition files at once. */
const COPY_CONNECTIONS = 3;

/**
 * Rows merged at once: partitions are merged in slices of about this many rows, fresh and existing, so that
 * the sort and the merged table of a commit stay small whatever the batch's size and the lake's. Two datasets
 * each sort one slice while writing the previous one, so up to four slices are in DuckDB's memory at once:
 * larger slices ran DuckDB out of memory. Since a run's windows span a scope's whole block range (joined
 * windows), a commit merges nearly every day partition, and slices of twice this size put the memory bench's
 * peak over its target (docs/performance.md, "Merge slices" and "Memory").
 */
export const MERGE_SLICE_ROWS = 25_000;

/** Consecutive partitions (sorted) grouped so that each group's rows stay within `limit` (at least one each). */
export function slicePartitions(counts: readonly (readonly [string, number])[], limit: number): string[][] {
  const slices: string[][] = [];
  let current: string[] = [];
  let rows = 0;
  for (const [p, n] of counts) {
    if (current.length > 0 && rows + n > limit) {
      slices.push(current);
      current = [];
      rows = 0;
    }
    current.push(p);
    rows += n;
  }
  if (current.length) slices.push(current);
  return slices;
}

/**
 * Types a dataset's staged rows and merges them with what the touched partitions hold: the typed rows of a
 * slice of partitions are unioned with those partitions' existing files, reduced to one row per natural key
 * (see writeMergedPartition for the rule) and sorted into a table; each partition's file is then a plain
 * row-range COPY of it. One vectorised pass per slice instead of a window-and-sort query per partition,
 * whose fixed costs dominated with many small day partitions; slices instead of the whole batch at once,
 * so that a commit's memory does not grow with the batch. Nothing in the lake changes here.
 */
export async function prepareDataset(input: PrepareInput): Promise<PreparedFile[]> {
  const { engine, paths, def, network, runId, ingestedAt, stagedFiles, workDir } = input;
  const pageFiles = input.pageFiles ?? [];
  const replacing = input.replacing ?? [];
  const shape = datasetShape(def);
  const part = ident(STAGED_PARTITION);
  // Windows fetched again whose rows are all gone bring no fresh row, yet their old rows must go.
  const none = `(SELECT *, NULL::VARCHAR AS ${part} FROM (${emptyTypedSelect(shape)}) WHERE false)`;
  let noFresh = stagedFiles.length === 0 && pageFiles.length === 0;
  if (noFresh && replacing.length === 0) return [];
  const typed = input.preloaded && !noFresh ? (await Promise.all(input.preloaded.map((b) => b.typedFiles(def)))).flat() : undefined;
  if (typed && typed.length === 0) {
    if (replacing.length === 0) return [];
    noFresh = true;
  }
  const preloaded = noFresh ? none : typed ? `read_parquet(${literalList(typed)})` : undefined;
  const finalDir = path.join(workDir, 'final');
  await mkdirDurable(finalDir);
  // A connection of its own: the datasets of a commit are prepared side by side (see commitRun).
  const conn = await engine.connect();
  const freshTable = ident('__chainlake_fresh');
  const freshColumn = ident(FRESH_COLUMN);
  const fresh = preloaded ?? freshTable;
  const temp = { repeated: ident('__chainlake_repeated_keys'), winners: ident('__chainlake_winners') };
  const merged = [ident(`__chainlake_merged_${def.name}_0`), ident(`__chainlake_merged_${def.name}_1`)];
  let writers: DuckDBConnection[] = [];
  try {
    // The rows' order matters nowhere here: they are reduced by key (by content, never by read order) and sorted.
    if (!preloaded) await createUnorderedTempTable(conn, freshTable, stagedSelect(def, runId, ingestedAt, stagedFiles, pageFiles));
    await testHook('typed');
    const counts = (
      (await conn.runAndReadAll(`SELECT ${part}, count(*)::BIGINT FROM ${fresh} GROUP BY ${part} ORDER BY 1`)).getRowsJS() as [string, bigint][]
    ).map(([p, n]) => [p, Number(n)] as const);
    const lakeTable = input.lake.table(shape.name);
    // Partitions a replaced window reaches but brings no row to are merged too (their old rows may have to go).
    const mine = [...lakeTable.partitions].flatMap(([key, files]) => {
      const [net, value] = key.split('\u0000') as [string, string];
      return net === network ? files.map((f) => ({ partition: value, span: f.blockSpan })) : [];
    });
    const reached = partitionsReaching(mine, replacing).filter((p) => !counts.some(([q]) => q === p));
    if (reached.length > 0) counts.push(...reached.map((p) => [p, 0] as const));
    counts.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    if (counts.length === 0) return [];
    const partitions = counts.map(([p]) => p);
    const keep = keptRowsCondition(def, replacing);
    const current = new Map(partitions.map((p) => [p, input.lake.files(shape.name, network, p)] as const));
    const existing = new Map([...current].map(([p, files]) => [p, files.map((f) => f.path)] as const));
    // Each partition's fresh rows plus the rows its current files hold: counting fresh rows alone let a late
    // commit of a large export merge slices of several times MERGE_SLICE_ROWS (every commit rewrites the day
    // partitions the earlier ones wrote).
    const merging = counts.map(([p, n]) => [p, n + current.get(p)!.reduce((sum, f) => sum + f.rows, 0)] as const);

    const projection = shape.columns.map((c) => `CAST(${ident(c.name)} AS ${c.type}) AS ${ident(c.name)}`).join(', ');
    const keyColumns = [part, ...shape.key.map(ident)];
    const rank = keyRank(shape);
    const order = [part, ...[...shape.order, ...shape.key.filter((k) => !shape.order.includes(k))].map(ident)].join(', ');
    const columns = shape.columns.map((c) => ident(c.name)).join(', ');
    // The partition of an existing file is its folder's name (`<column>=<value>`), as LakePaths lays it out.
    const folder = literal(`/${shape.partition}=([^/]+)/[^/]+$`);

    // Day partitions are small, so one COPY hardly keeps one core busy and its fixed cost (planning, file
    // and footer, a compressor per column) dominates: several connections write partitions side by side
    // (twice the files per second with 2 connections on the 2-core bench machine).
    writers = await Promise.all(Array.from({ length: Math.min(input.writers ?? COPY_CONNECTIONS, partitions.length) }, () => engine.connect()));
    const copied: { file: CopiedFile; runRows: number }[] = [];
    /** Merges one slice into the table `table`: its partitions' row-id runs once it is sorted. */
    const buildSlice = async (
      slice: string[],
      table: string,
      index: number,
    ): Promise<{ slice: string[]; table: string; runs: Map<string, PartitionRun>; index: number }> => {
      const inSlice = slice.length === partitions.length ? '' : ` WHERE ${part} BETWEEN ${literal(slice[0]!)} AND ${literal(slice[slice.length - 1]!)}`;
      const mark = (own: boolean): string => (input.derive ? `, ${own} AS ${freshColumn}` : '');
      const sources = [`SELECT *, NULL::VARCHAR AS ${part}${mark(false)} FROM (${emptyTypedSelect(shape)})`, `SELECT *${mark(true)} FROM ${fresh}${inSlice}`];
      const old = slice.flatMap((p) => existing.get(p)!);
      if (old.length > 0) {
        sources.push(
          `SELECT * EXCLUDE (filename), regexp_extract(filename, ${folder}, 1) AS ${part}${mark(false)} FROM read_parquet(${literalList(old)}, hive_partitioning = false, union_by_name = true, filename = true)${keep ? ` WHERE ${keep}` : ''}`,
        );
      }
      const union = sources.map((s) => `(${s})`).join(' UNION ALL BY NAME ');
      const projected = `SELECT ${projection}, ${part}${input.derive ? `, ${freshColumn}` : ''} FROM (${union})`;
      const reduced = await onePerKey(conn, projected, keyColumns, rank, temp);
      // A plain table (the engine's database is in memory and the run's own): the writers' connections read it.
      await conn.run(`CREATE OR REPLACE TABLE ${table} AS SELECT * FROM (${reduced}) ORDER BY ${order}`);
      await conn.run(`DROP TABLE IF EXISTS ${temp.winners}`);
      // The table is sorted by partition, so each partition is one run of row ids: a row-id range scan reads
      // just that run (a filter on the partition column would scan whole row groups for every partition).
      // The file's statistics come from its COPY; this pass only finds the ranges and the run's own rows.
      const rows = (
        await conn.runAndReadAll(
          `SELECT ${part}, min(rowid), max(rowid), count(*) FILTER (WHERE _run_id = ${literal(runId)})::BIGINT FROM ${table} GROUP BY ${part}`,
        )
      ).getRowsJS() as [string, bigint, bigint, bigint][];
      const runs = new Map(rows.map(([p, lo, hi, mine]) => [p, { lo, hi, runRows: Number(mine) }]));
      return { slice, table, runs, index };
    };
    const writePartition = async (c: DuckDBConnection, table: string, run: PartitionRun, partition: string): Promise<CopiedFile> =>
      // A scan of the sorted table keeps its order, so the file comes out sorted.
      copyLakeFile(
        c,
        lakeTable,
        shape,
        { network, value: partition },
        `SELECT ${columns} FROM ${table} WHERE rowid BETWEEN ${run.lo} AND ${run.hi}`,
        path.join(finalDir, `${shape.name}.${network}.${partition}.parquet`),
      );
    // The next slice is merged while the writers write this one (two tables in turn): the sort then hides
    // behind the COPYs instead of leaving the writers idle (docs/performance.md, "Merge slices").
    const slices = slicePartitions(merging, input.sliceRows ?? MERGE_SLICE_ROWS);
    const startSlice = (i: number): ReturnType<typeof buildSlice> => {
      const building = buildSlice(slices[i]!, merged[i % 2]!, i);
      // It may fail while the previous slice's files are still being written, before anything awaits it:
      // an unhandled rejection would end the process instead of failing this commit (the await below throws).
      building.catch(() => undefined);
      return building;
    };
    let next: ReturnType<typeof buildSlice> | undefined = startSlice(0);
    try {
      for (let i = 0; i < slices.length; i++) {
        const current = await next!;
        next = i + 1 < slices.length ? startSlice(i + 1) : undefined;
        const written = new Array<{ file: CopiedFile; runRows: number }>(current.slice.length);
        const derived = input.derive?.slice(current.table, current.slice, current.index, input.lake);
        const tasks: WriterTask[] = [
          ...(derived?.first ?? []),
          ...current.slice.map((p, j) => async (c: DuckDBConnection) => {
            // A partition whose rows all went (a replaced window's) is written empty: it still replaces its old files.
            const run = current.runs.get(p) ?? { lo: 1n, hi: 0n, runRows: 0 };
            written[j] = { file: await writePartition(c, current.table, run, p), runRows: run.runRows };
          }),
          ...(derived?.then ?? []),
        ];
        await eachBounded(tasks, writers.length, (task, w) => task(writers[w]!));
        copied.push(...written);
      }
    } finally {
      // Whatever failed, the main connection's statements must have ended before the tables are dropped.
      await next?.catch(() => undefined);
    }
    const measured = await measureLakeFiles(
      writers[0]!,
      copied.map((c) => c.file),
    );
    const out = measured.map((m, i) =>
      preparedFile(paths, { shape, network, partition: copied[i]!.file.partition.value }, copied[i]!.file.target, m, copied[i]!.runRows),
    );
    await Promise.all(out.map((f) => fsyncFile(f.from)));
    await testHook('final');
    return out;
  } finally {
    for (const c of writers) c.closeSync();
    try {
      await conn.run(
        `DROP TABLE IF EXISTS ${freshTable}; DROP TABLE IF EXISTS ${temp.repeated}; DROP TABLE IF EXISTS ${temp.winners}; ${merged.map((m) => `DROP TABLE IF EXISTS ${m}`).join('; ')}`,
      );
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
 * Rejects join the day's log partition of `_rejects` (one file per network and run date, merged): the staged
 * ones, and `more` (a relation with the REJECTS_SHAPE columns: rejects derived in the same commit). With
 * `replaced`, each day holding a reject it replaces is rewritten without those (the day's own too), so that
 * deriving the same rows again (a decoding of logs fetched again) replaces its rejects instead of adding them.
 */
export async function prepareRejects(input: Omit<PrepareInput, 'def'> & { date: string; more?: string; replaced?: ReplacedRejects }): Promise<PreparedRejects> {
  const { engine, paths, lake, network, runId, ingestedAt, stagedFiles, workDir, date, replaced } = input;
  const out: PreparedRejects = { files: [], cleared: [] };
  const sources = [...(stagedFiles.length ? [rejectsSelect(stagedFiles, network, runId, ingestedAt)] : []), ...(input.more ? [input.more] : [])];
  const fresh = sources.length ? sources.map((s) => `(${s})`).join(' UNION ALL BY NAME ') : undefined;
  const n = fresh ? Number((await engine.conn.runAndReadAll(`SELECT count(*)::BIGINT FROM (${fresh})`)).getRowsJS()[0]![0]) : 0;
  const days = new Set([...(n > 0 ? [date] : []), ...(replaced?.days ?? [])]);
  if (days.size === 0) return out;
  await mkdirDurable(workDir);
  for (const day of days) {
    const rows = day === date && n > 0 ? fresh : undefined;
    if (!rows && replaced) {
      const existing = lake.files(REJECTS_SHAPE.name, network, day).map((f) => f.path);
      const left =
        existing.length === 0
          ? 0
          : Number(
              (
                await engine.conn.runAndReadAll(
                  `SELECT count(*)::BIGINT FROM read_parquet(${literalList(existing)}, hive_partitioning = false, union_by_name = true) WHERE ${replaced.keep}`,
                )
              ).getRowsJS()[0]![0],
            );
      if (left === 0) {
        if (existing.length > 0) out.cleared.push({ table: REJECTS_SHAPE.name, partitionValues: [network, day] });
        continue;
      }
    }
    out.files.push(await preparePartition(engine, paths, lake, REJECTS_SHAPE, network, day, rows, workDir, replaced?.keep));
  }
  return out;
}
