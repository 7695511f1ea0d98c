/**
 * The sliced merge under mergeTable (merge-table.ts, the one table merge of both committers): a table's fresh typed
 * rows merged with what the partitions they touch hold, one row per natural key, slice by slice, each partition then
 * written as one file by the caller's writer, and the derivation hooks (decoded events) run on each merged slice.
 */
import type { DuckDBConnection } from '@duckdb/node-api';
import type { Engine } from '../engine.js';
import { emptyTypedSelect, STAGED_PARTITION, type TableShape } from '../schema.js';
import { ident, literal } from '../sql.js';
import { eachBounded } from '../bounded.js';
import { keyRank, onePerKey } from './merge.js';

/** Name of the merged slice's column saying a row is the commit's own (typed from its staged files), not a row the partition held. */
export const FRESH_COLUMN = '__fresh';

/** Work for one of the partition writers' connections. */
export type WriterTask = (writer: DuckDBConnection) => Promise<void>;

/**
 * Rows derived from a dataset's commit (decoded events from event_logs: decode/in-commit.ts), prepared from
 * the merge's sorted slices instead of from rows read again: each slice table is sorted by partition then the
 * dataset's order, and says which rows are the commit's own (FRESH_COLUMN). The tasks `slice` gives for a
 * slice run on the partition writers while the next slice is merged (so that deriving does not hold up the
 * merge), `first` before the slice's own files and `then` after them, and end before that table is reused.
 * Whatever they prepare is the derivation's to report (the caller puts it in its commit).
 */
export interface SliceHook {
  /** `replaced`: the merge dropped current rows of replaced windows (load/write/replace.ts), which rows derived from them follow. */
  slice(table: string, partitions: readonly string[], index: number, replaced: boolean): { first: WriterTask[]; then: WriterTask[] };
}

/** A partition's rows in a sorted merge table: its row-id range, and the rows of the committing run in it. */
export interface PartitionRows {
  /** A query of the partition's merged rows, in the file's order (a row-id range of the sorted slice table). */
  select: string;
  /** Rows in the partition after the merge. */
  rows: number;
  /** Rows of the committing run (its `_run_id`) in the partition; 0 without a run id. */
  runRows: number;
}

/**
 * Connections writing a commit's partition files at once. Day partitions are small, so one COPY hardly keeps
 * one core busy and its fixed cost (planning, file and footer, a compressor per column) dominates: several
 * connections write partitions side by side.
 */
export const COPY_CONNECTIONS = 3;

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

export interface SliceMergeInput<F> {
  engine: Engine;
  /** The connection that reads `fresh` (a temp table of it may live there) and builds the slices. */
  conn: DuckDBConnection;
  shape: TableShape;
  /** Distinguishes the merge tables of merges run side by side (a dataset and a network). */
  name: string;
  /** A relation of the fresh rows (the shape's columns and STAGED_PARTITION). */
  fresh: string;
  /** Every partition merged, in order, with its rows fresh and existing (they size the slices). */
  partitions: readonly (readonly [string, number])[];
  /**
   * The rows the slice's partitions hold now and keep (the shape's columns and STAGED_PARTITION, without the
   * rows of windows fetched again), or undefined when they hold none.
   */
  existing(slice: readonly string[]): Promise<string | undefined>;
  /** Rows of this run are counted in each partition (PartitionRows.runRows). */
  runId?: string;
  /** Connections writing partition files at once (default COPY_CONNECTIONS). */
  writers?: number;
  /** Fresh rows merged at once (default MERGE_SLICE_ROWS). */
  sliceRows?: number;
  /** Rows derived from each merged slice, on the same writers. */
  derive?: SliceHook;
  /** The current rows `existing` gives leave out those of windows fetched again (SliceHook's `replaced`). */
  replaced?: boolean;
  /** Writes one partition's file from its merged rows (a partition whose rows all went comes with none). */
  write(writer: DuckDBConnection, partition: string, rows: PartitionRows): Promise<F>;
}

/**
 * Merges the fresh rows of a slice of partitions with those partitions' existing rows: unioned, reduced to one
 * row per natural key (the newest `_ingested_at` wins; a content hash breaks ties so the result never depends
 * on read order: see onePerKey) and sorted into a table, of which each partition is a row-id range that
 * `write` turns into its file. One vectorised pass per slice instead of a window-and-sort query per
 * partition, whose fixed costs dominated with many small day partitions; slices instead of the whole batch at
 * once, so that a commit's memory does not grow with the batch. The next slice is merged while the writers
 * write this one (two tables in turn): the sort then hides behind the COPYs instead of leaving the writers
 * idle (docs/performance.md, "Merge slices"). Returns what `write` gave, in partition order.
 */
export async function mergeSlices<F>(input: SliceMergeInput<F>): Promise<F[]> {
  const { engine, conn, partitions } = input;
  if (partitions.length === 0) return [];
  const sql = sliceSql(input);
  const slices = slicePartitions(partitions, input.sliceRows ?? MERGE_SLICE_ROWS);
  const out: F[] = [];
  const writers = await Promise.all(Array.from({ length: Math.min(input.writers ?? COPY_CONNECTIONS, partitions.length) }, () => engine.connect()));
  const startSlice = (i: number): Promise<MergedSlice> => {
    const building = mergeSlice(input, sql, slices[i]!, sql.merged[i % 2]!, i);
    // It may fail while the previous slice's files are still being written, before anything awaits it:
    // an unhandled rejection would end the process instead of failing this commit (the await below throws).
    building.catch(() => undefined);
    return building;
  };
  let next: Promise<MergedSlice> | undefined;
  try {
    next = startSlice(0);
    for (let i = 0; i < slices.length; i++) {
      const current = await next!;
      next = i + 1 < slices.length ? startSlice(i + 1) : undefined;
      out.push(...(await writeSlice(input, sql, current, writers)));
    }
  } finally {
    // Whatever failed, the main connection's statements must have ended before the tables are dropped.
    await next?.catch(() => undefined);
    for (const c of writers) c.closeSync();
    await conn.run([sql.temp.repeated, sql.temp.winners, ...sql.merged].map((t) => `DROP TABLE IF EXISTS ${t}`).join('; ')).catch(() => undefined);
  }
  return out;
}

/** The SQL pieces every slice of one table's merge uses, made once. */
interface SliceSql {
  part: string;
  freshColumn: string;
  /** The partitions of the whole merge. */
  all: string[];
  temp: { repeated: string; winners: string };
  /** The two tables the slices are merged into in turn: plain tables, so that the writers' connections read them. */
  merged: string[];
  projection: string;
  keyColumns: string[];
  rank: ReturnType<typeof keyRank>;
  order: string;
  columns: string;
  /** The fresh-row mark a derivation reads (`own`: the row is the commit's), or nothing without one. */
  mark(own: boolean): string;
  /** How many of a partition's rows the run wrote. */
  ofRun: string;
}

function sliceSql<F>(input: SliceMergeInput<F>): SliceSql {
  const { shape, runId } = input;
  const part = ident(STAGED_PARTITION);
  const freshColumn = ident(FRESH_COLUMN);
  return {
    part,
    freshColumn,
    all: input.partitions.map(([p]) => p),
    temp: { repeated: ident('__chainlake_repeated_keys'), winners: ident('__chainlake_winners') },
    // The engine's database is in memory and the process's own.
    merged: [0, 1].map((i) => ident(`__chainlake_merged_${input.name}_${i}`)),
    projection: shape.columns.map((c) => `CAST(${ident(c.name)} AS ${c.type}) AS ${ident(c.name)}`).join(', '),
    keyColumns: [part, ...shape.key.map(ident)],
    rank: keyRank(shape),
    order: [part, ...[...shape.order, ...shape.key.filter((k) => !shape.order.includes(k))].map(ident)].join(', '),
    columns: shape.columns.map((c) => ident(c.name)).join(', '),
    mark: (own) => (input.derive ? `, ${own} AS ${freshColumn}` : ''),
    ofRun: runId === undefined ? '0' : `count(*) FILTER (WHERE _run_id = ${literal(runId)})`,
  };
}

/** One slice merged into its table, sorted: each of its partitions is a row-id range of it. */
interface MergedSlice {
  slice: string[];
  table: string;
  runs: Map<string, PartitionRows>;
  index: number;
}

/** Merges one slice into the table `table`: its partitions' row-id ranges once it is sorted. */
async function mergeSlice<F>(input: SliceMergeInput<F>, sql: SliceSql, slice: string[], table: string, index: number): Promise<MergedSlice> {
  const { conn, shape } = input;
  const { part, freshColumn, mark } = sql;
  const inSlice = slice.length === sql.all.length ? '' : ` WHERE ${part} BETWEEN ${literal(slice[0]!)} AND ${literal(slice[slice.length - 1]!)}`;
  const sources = [`SELECT *, NULL::VARCHAR AS ${part}${mark(false)} FROM (${emptyTypedSelect(shape)})`, `SELECT *${mark(true)} FROM ${input.fresh}${inSlice}`];
  const old = await input.existing(slice);
  if (old) sources.push(`SELECT *${mark(false)} FROM (${old})`);
  const union = sources.map((s) => `(${s})`).join(' UNION ALL BY NAME ');
  const projected = `SELECT ${sql.projection}, ${part}${input.derive ? `, ${freshColumn}` : ''} FROM (${union})`;
  const reduced = await onePerKey(conn, projected, sql.keyColumns, sql.rank, sql.temp, shape.kept);
  await conn.run(`CREATE OR REPLACE TABLE ${table} AS SELECT * FROM (${reduced}) ORDER BY ${sql.order}`);
  await conn.run(`DROP TABLE IF EXISTS ${sql.temp.winners}`);
  // The table is sorted by partition, so each partition is one run of row ids: a row-id range scan reads
  // just that run (a filter on the partition column would scan whole row groups for every partition).
  const rows = (
    await conn.runAndReadAll(`SELECT ${part}, min(rowid), max(rowid), count(*)::BIGINT, ${sql.ofRun}::BIGINT FROM ${table} GROUP BY ${part}`)
  ).getRowsJS() as [string, bigint, bigint, bigint, bigint][];
  const runs = new Map(
    rows.map(([p, lo, hi, n, mine]) => [
      p,
      { select: `SELECT ${sql.columns} FROM ${table} WHERE rowid BETWEEN ${lo} AND ${hi}`, rows: Number(n), runRows: Number(mine) } satisfies PartitionRows,
    ]),
  );
  return { slice, table, runs, index };
}

/** A merged slice's partition files (and its derivations' tasks) on the writers' connections; what `write` gave, in partition order. */
async function writeSlice<F>(input: SliceMergeInput<F>, sql: SliceSql, current: MergedSlice, writers: DuckDBConnection[]): Promise<F[]> {
  const written = new Array<F>(current.slice.length);
  const derived = input.derive?.slice(current.table, current.slice, current.index, input.replaced === true);
  const tasks: WriterTask[] = [
    ...(derived?.first ?? []),
    ...current.slice.map((p, j) => async (c: DuckDBConnection) => {
      // A scan of the sorted table keeps its order, so the file comes out sorted.
      const rows = current.runs.get(p) ?? { select: `SELECT ${sql.columns} FROM ${current.table} WHERE false`, rows: 0, runRows: 0 };
      written[j] = await input.write(c, p, rows);
    }),
    ...(derived?.then ?? []),
  ];
  await eachBounded(tasks, writers.length, (task, w) => task(writers[w]!));
  return written;
}
