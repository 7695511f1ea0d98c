// Decoding an export's event logs inside the commit that lands them: each merged slice of event_logs (sorted
// by day, then by timestamp, transaction_index and log_index, which is the decoded datasets' order too) has
// its rows of this commit decoded by one of the commit's partition writers while the next slice is merged,
// and the decoded days are written by the writers beside the slice's own files, into the commit's journal.
// Decoding therefore reads no row again, sorts nothing when one SQL statement decoded a dataset, writes each
// day by a row-id range instead of a filtered scan of every decoded row, and needs no commit of its own.
// Where a decoded day goes and which earlier rejects it replaces is the committer's (DecodedTarget): the
// local lake's files and journal (CommitDecoding), or the distributed committer's store and catalog.

import type { DuckDBConnection } from '@duckdb/node-api';
import path from 'node:path';
import type { CommitDerivation } from '../load/write/commit-run.js';
import { preparedFile, type ClearedPartition, type PreparedFile } from '../load/write/commit.js';
import { FRESH_COLUMN, type WriterTask } from '../load/write/merge-slices.js';
import { copyLakeFile, measureLakeFiles, type CopiedFile } from '../load/write/lake-file.js';
import { mergeShape, type LakeState } from '../load/write/lake-state.js';
import { emptyTypedSelect, STAGED_PARTITION, type TableShape } from '../load/schema.js';
import { fsyncFile, mkdirDurable } from '../load/write/durable.js';
import { mergedRows } from '../load/write/merge.js';
import type { LakePartitions } from '../load/write/lake-partitions.js';
import { ident, literal } from '../load/sql.js';
import type { DecodedDataset } from './datasets.js';
import { decodeLogs, distinctDatasets } from './decode.js';
import { declaredTables, decodedShape, type DecodeLakeInput } from './lake.js';
import { dropReplacedRejects, findReplacedRejects, KEEP_REJECT } from './rejects.js';
import { bugError } from '../errors.js';

export interface SliceDecodingInput extends Pick<DecodeLakeInput, 'engine' | 'network' | 'datasets' | 'runId' | 'ingestedAt'> {
  /** A fresh folder under the commit's work folder. */
  workDir: string;
}

export interface CommitDecodingInput extends SliceDecodingInput, Pick<DecodeLakeInput, 'paths'> {}

/** Where a committer reads what a decoded day holds and puts the day's file, and where the rejects it replaces are found. */
export interface DecodedTarget<F> {
  /** What a decoded dataset's partitions hold now (the committer's side of the lake: see mergeTable). */
  lake(shape: TableShape): LakePartitions;
  /** The shape a decoded dataset's days are merged and written with: its table's columns another writer added too (mergeShape). */
  shape(declared: TableShape): TableShape;
  /**
   * Writes one decoded day's file from `select` (its rows with the shape's columns, in the file's order);
   * `workFile` names a file of the commit's work folder.
   */
  write(writer: DuckDBConnection, shape: TableShape, partition: string, select: string, workFile: string): Promise<F>;
  /** The `_rejects` partitions holding decode rejects that decoding `logs` replaces (see findReplacedRejects). */
  replacedRejects(conn: DuckDBConnection, logs: string): Promise<string[]>;
}

/** What a commit's decoding prepared: its days' files, its rejects, and the earlier rejects' partitions they replace. */
export interface DecodedDays<F> {
  files: F[];
  /** A relation of the `_rejects` rows (with `_run_id` and `_ingested_at`), when there are any. */
  rejects?: string;
  /** `_rejects` partitions holding rejects of the same logs, which KEEP_REJECT drops. */
  replacedRejectDays: string[];
}

/** What a commit's decoding gave, for the run's report. */
export interface CommitDecodingStats {
  logs: number;
  rejects: number;
  /** Logs of another standard's shape skipped, by shape. */
  skipped: Map<string, number>;
  files: number;
  rows: Map<string, number>;
  partitions: Map<string, Set<string>>;
}

/** One commit's decoding of its event logs (see the top of this file), for the committer's `target`. */
export abstract class SliceDecoding<F> {
  readonly dataset = 'event_logs';
  /** The first error: the commit then goes on without decoded rows, and the run decodes them after its last commit. */
  failure: Error | undefined;
  readonly stats: CommitDecodingStats = { logs: 0, rejects: 0, skipped: new Map(), files: 0, rows: new Map(), partitions: new Map() };
  protected readonly files: F[] = [];
  private readonly rejectsTable = ident('__decoded_rejects');
  private rejectsKept = false;
  /** The logs decoded (transaction_hash, log_index): the rejects of an earlier decoding of them are replaced. */
  private readonly logsTable = ident('__decoded_logs');
  private logsKept = false;
  /** `dataset/partition` of every day written: a day must come from one slice only. */
  private readonly days = new Set<string>();
  private workDirMade = false;

  constructor(protected readonly input: SliceDecodingInput) {}

  /** Whether what `write` gave is a file (not a day cleared of every row: addOrphanedDays). */
  protected abstract isFile(written: F): boolean;

  /** Where the days go (given the local lake's state when the committer has one). */
  protected abstract target(lake: LakeState | undefined): DecodedTarget<F>;
  private chosen: DecodedTarget<F> | undefined;

  /** The decoded datasets' tables: the commit creates those the lake lacks before anything is written. */
  get shapes(): TableShape[] {
    return distinctDatasets(this.input.datasets).map(decodedShape);
  }

  slice(table: string, partitions: readonly string[], index: number, replaced: boolean, lake?: LakeState): { first: WriterTask[]; then: WriterTask[] } {
    if (this.failure) return { first: [], then: [] };
    const target = (this.chosen ??= this.target(lake));
    // One task decodes the slice; one per dataset and day of the slice writes that day once it is decoded (a
    // day of a log's timestamp is its event_logs day), so other writers write the days side by side.
    let decoded!: (days: Map<string, DayRange> | undefined) => void;
    const days = new Promise<Map<string, DayRange> | undefined>((resolve) => (decoded = resolve));
    const decode: WriterTask = async (writer) => {
      try {
        decoded(await this.decodeSlice(writer, table, partitions, index, replaced ? target : undefined));
      } catch (e) {
        this.failure ??= e as Error;
        decoded(undefined);
      }
    };
    const writes = distinctDatasets(this.input.datasets).flatMap((d) =>
      partitions.map((p): WriterTask => async (writer) => {
        const day = (await days)?.get(`${d.name}/${p}`);
        if (!day || this.failure) return;
        try {
          this.files.push(await this.writeDay(writer, target, d, day, replaced ? table : undefined));
        } catch (e) {
          this.failure ??= e as Error;
        }
      }),
    );
    return { first: [decode], then: writes };
  }

  /**
   * Decodes the slice's own rows; each decoded dataset's days by `dataset/day`, with the table holding them. With
   * `replaced` (the merge dropped logs of windows fetched again: a reorganised head), also the days whose decoded
   * rows include some of a log the slice no longer holds, with no row of their own: those rows must go too.
   */
  private async decodeSlice(
    conn: DuckDBConnection,
    table: string,
    partitions: readonly string[],
    index: number,
    replaced?: DecodedTarget<F>,
  ): Promise<Map<string, DayRange>> {
    const { datasets, runId, ingestedAt } = this.input;
    if (!this.workDirMade) await mkdirDurable(this.input.workDir);
    this.workDirMade = true;
    // Slices are decoded one after the other (each before the next slice's tasks start), but a slice's days are
    // written after it is decoded: its tables live until the next slice's decoding replaces them.
    const prefix = tablePrefix(index);
    const out = await decodeLogs({
      conn,
      // Only the commit's own rows: the rest of the days were decoded when they were committed.
      logs: `SELECT * FROM ${table} WHERE ${ident(FRESH_COLUMN)}`,
      datasets,
      runId,
      ingestedAt,
      workDir: path.join(this.input.workDir, `slice-${index}`),
      prefix,
    });
    await this.keepLogsAndRejects(conn, table, out);
    const inSlice = new Set(partitions);
    const byDay = new Map<string, DayRange>();
    for (const d of distinctDatasets(datasets)) {
      if (!out.rows.get(d.name)) continue;
      const shape = decodedShape(d);
      let rows = out.tables.get(d.name)!;
      let days = await dayRanges(conn, rows);
      if (!out.ordered.has(d.name) || days.some((r) => r.hi - r.lo + 1n !== BigInt(r.rows))) {
        // Decoded by several statements (or in JavaScript): sorted here, a slice at a time.
        const sorted = `${rows}_sorted`;
        await conn.run(`CREATE OR REPLACE TABLE ${sorted} AS SELECT * FROM ${rows} ORDER BY __partition, ${shape.order.map(ident).join(', ')}`);
        rows = sorted;
        days = await dayRanges(conn, rows);
      }
      this.stats.rows.set(d.name, (this.stats.rows.get(d.name) ?? 0) + out.rows.get(d.name)!);
      const seen = this.stats.partitions.get(d.name) ?? new Set<string>();
      this.stats.partitions.set(d.name, seen);
      for (const day of days) {
        const key = `${d.name}/${day.partition}`;
        // Written by this slice's tasks only: a day outside the slice, or met twice, would go unwritten or be written twice.
        if (!inSlice.has(day.partition) || this.days.has(key)) throw bugError(`decoded day ${key} outside the slice of its logs, or met twice`);
        this.days.add(key);
        seen.add(day.partition);
        byDay.set(key, { ...day, table: rows });
      }
    }
    if (replaced) await this.addOrphanedDays(conn, replaced, table, partitions, out.tables, byDay);
    return byDay;
  }

  /** The slice's own logs (which rejects a decoding replaces) and its decoding's rejects and counts, kept for the commit. */
  private async keepLogsAndRejects(conn: DuckDBConnection, table: string, out: Awaited<ReturnType<typeof decodeLogs>>): Promise<void> {
    // Plain, not temporary: the rejects they replace are found on another connection (prepared).
    if (!this.logsKept) await conn.run(`CREATE OR REPLACE TABLE ${this.logsTable} (transaction_hash VARCHAR, log_index BIGINT)`);
    this.logsKept = true;
    await conn.run(`INSERT INTO ${this.logsTable} SELECT transaction_hash, log_index FROM ${table} WHERE ${ident(FRESH_COLUMN)}`);
    this.stats.logs += out.logs;
    this.stats.rejects += out.rejectCount;
    for (const [shape, n] of out.skipped) this.stats.skipped.set(shape, (this.stats.skipped.get(shape) ?? 0) + n);
    if (out.rejectCount > 0) {
      // Plain, not temporary: the commit's rejects partition is prepared on another connection.
      if (!this.rejectsKept) await conn.run(`CREATE OR REPLACE TABLE ${this.rejectsTable} AS SELECT * FROM ${out.rejects} LIMIT 0`);
      this.rejectsKept = true;
      await conn.run(`INSERT INTO ${this.rejectsTable} SELECT * FROM ${out.rejects}`);
    }
  }

  /**
   * The days of the slice whose decoded rows include some of a log the merged slice (`table`: every log of its
   * days after the merge) does not hold, for each decoded dataset: those without a decoded row of this commit
   * get an empty row range, so that they are written again without those rows (writeDay).
   */
  private async addOrphanedDays(
    conn: DuckDBConnection,
    target: DecodedTarget<F>,
    table: string,
    partitions: readonly string[],
    decodedTables: ReadonlyMap<string, string>,
    byDay: Map<string, DayRange>,
  ): Promise<void> {
    for (const d of distinctDatasets(this.input.datasets)) {
      const existing = await target.lake(decodedShape(d)).select(partitions);
      if (!existing) continue;
      const days = (
        await conn.runAndReadAll(`SELECT DISTINCT ${ident(STAGED_PARTITION)} FROM (${existing}) e WHERE NOT EXISTS (${logOf(table, 'e')})`)
      ).getRowsJS() as [string][];
      for (const [partition] of days) {
        const key = `${d.name}/${partition}`;
        if (byDay.has(key) || this.days.has(key)) continue;
        this.days.add(key);
        byDay.set(key, { table: decodedTables.get(d.name)!, partition, lo: 1n, hi: 0n, rows: 0 });
      }
    }
  }

  /**
   * One decoded day, from its row range of the decoded table (a row-range scan of a table in order keeps that
   * order), merged by natural key with the rows the day holds when it holds any. `logs`: the merged slice, when it
   * dropped logs (SliceHook's `replaced`): the day keeps only rows of a log it holds.
   */
  private async writeDay(writer: DuckDBConnection, target: DecodedTarget<F>, d: DecodedDataset, day: DayRange, logs?: string): Promise<F> {
    const shape = target.shape(decodedShape(d));
    const from = path.join(this.input.workDir, `${shape.name}.${this.input.network}.${day.partition}.parquet`);
    const decoded = `SELECT * EXCLUDE (__partition) FROM ${day.table} WHERE rowid BETWEEN ${day.lo} AND ${day.hi}`;
    // No decoded row has another writer's columns: NULL where the day holds no row to keep them from.
    const fresh = shape.kept?.length ? `(${emptyTypedSelect(shape)}) UNION ALL BY NAME (${decoded})` : decoded;
    const current = await target.lake(shape).select([day.partition]);
    const existing = current && logs ? `SELECT * FROM (${current}) e WHERE EXISTS (${logOf(logs, 'e')})` : current;
    const projection = shape.columns.map((c) => `CAST(${ident(c.name)} AS ${c.type}) AS ${ident(c.name)}`).join(', ');
    const merged = existing ? mergedRows(shape, [`SELECT * EXCLUDE (${ident(STAGED_PARTITION)}) FROM (${existing})`, fresh]) : undefined;
    const select = merged ? `SELECT * FROM (${merged.rows}) ORDER BY ${merged.order}` : `SELECT ${projection} FROM (${fresh})`;
    return target.write(writer, shape, day.partition, select, from);
  }

  /** What the slices prepared, once every one is written; undefined when decoding failed (the commit goes on without it). */
  async decoded(): Promise<DecodedDays<F> | undefined> {
    if (this.failure) return undefined;
    this.stats.files = this.files.filter((f) => this.isFile(f)).length;
    const { runId, ingestedAt } = this.input;
    // Logs fetched again (a re-run of the same range) are decoded again: their rejects replace the earlier ones.
    const replacedRejectDays = this.logsKept && this.chosen ? await this.chosen.replacedRejects(this.input.engine.conn, `SELECT * FROM ${this.logsTable}`) : [];
    return {
      files: this.files,
      replacedRejectDays,
      ...(this.rejectsKept
        ? { rejects: `SELECT *, ${literal(runId)} AS _run_id, CAST(${literal(ingestedAt)} AS TIMESTAMPTZ) AS _ingested_at FROM ${this.rejectsTable}` }
        : {}),
    };
  }

  /** Drops the tables it created (after the commit, whatever its outcome). */
  async close(): Promise<void> {
    // By name, so that the tables of a decoding that failed half-way go too (decodeLogs names them `<prefix><i>`).
    const n = distinctDatasets(this.input.datasets).length;
    const tables = [0, 1].flatMap((k) => Array.from({ length: n }, (_, i) => `${tablePrefix(k)}${i}`)).flatMap((t) => [t, `${t}_sorted`]);
    await this.input.engine.conn.run([...tables, this.rejectsTable, this.logsTable].map((t) => `DROP TABLE IF EXISTS ${t}`).join('; '));
    await dropReplacedRejects(this.input.engine.conn);
  }
}

/**
 * The decoding of a single machine's commit: its days go into the commit's journal beside the lake's files. A day's
 * file is measured with the others once all are written, in one read of their footers, as a dataset's are (a read
 * per day was a visible share of a decoding commit).
 */
export class CommitDecoding extends SliceDecoding<CopiedFile | ClearedPartition> implements CommitDerivation {
  constructor(private readonly local: CommitDecodingInput) {
    super(local);
  }

  protected isFile(written: CopiedFile | ClearedPartition): boolean {
    return 'target' in written;
  }

  protected target(lake: LakeState | undefined): DecodedTarget<CopiedFile | ClearedPartition> {
    if (!lake) throw bugError('a single machine commit decodes with its lake state, and none was given');
    const { network, datasets } = this.local;
    return {
      lake: (shape) => lake.partitionsOf(shape, network),
      shape: (declared) => mergeShape(declared, lake.table(declared.name)),
      write: async (writer, shape, day, select, from) => {
        const copied = await copyLakeFile(writer, lake.table(shape.name), shape, { network, value: day }, select, from);
        // A day every row of which went (decoded from logs a reorganisation took: addOrphanedDays) has no file: its
        // old files end with none in their place, as a dataset's partition whose rows all went.
        return copied.rows === 0 ? { table: shape.name, partitionValues: [network, day] } : copied;
      },
      replacedRejects: (conn, logs) => findReplacedRejects(conn, lake, network, datasets, logs),
    };
  }

  async prepared(): Promise<{ files: PreparedFile[]; rejects?: string; tables: ReturnType<typeof declaredTables>; cleared?: ClearedPartition[] } | undefined> {
    const out = await this.decoded();
    if (!out) return undefined;
    const { paths, network, engine } = this.local;
    const copied = out.files.filter((f): f is CopiedFile => this.isFile(f));
    const cleared = out.files.filter((f): f is ClearedPartition => !this.isFile(f));
    // The commit's merges have ended: its connection is free.
    const measured = await measureLakeFiles(engine.conn, copied);
    const files = measured.map((m, i) =>
      preparedFile(paths, { shape: copied[i]!.shape, network, partition: copied[i]!.partition.value }, copied[i]!.target, m),
    );
    // Side by side once all are written, as the commit's own files.
    await Promise.all(files.map((f) => fsyncFile(f.from)));
    return {
      files,
      ...(cleared.length ? { cleared } : {}),
      ...(out.replacedRejectDays.length ? { replacedRejects: { keep: KEEP_REJECT, days: out.replacedRejectDays } } : {}),
      rejects: out.rejects,
      tables: declaredTables(this.local.datasets),
    };
  }
}

/** A subquery finding the log of decoded row `alias` in `logs` (a relation of event_logs rows). */
const logOf = (logs: string, alias: string): string =>
  `SELECT 1 FROM ${logs} l WHERE l.transaction_hash = ${alias}.transaction_hash AND l.log_index = ${alias}.log_index`;

/** Names of the decoded tables of slice `index` (see decodeSlice). */
const tablePrefix = (index: number): string => `__decoded_${index % 2}_`;

interface DayRange {
  /** The decoded table holding the day's rows. */
  table: string;
  partition: string;
  lo: bigint;
  hi: bigint;
  rows: number;
}

/** Each day's row-id range in a decoded table, and its rows (a day in order is one range of as many rows). */
async function dayRanges(conn: DuckDBConnection, table: string): Promise<DayRange[]> {
  const rows = (await conn.runAndReadAll(`SELECT __partition, min(rowid), max(rowid), count(*)::BIGINT FROM ${table} GROUP BY 1`)).getRowsJS() as [
    string,
    bigint,
    bigint,
    bigint,
  ][];
  return rows.map(([partition, lo, hi, n]) => ({ table, partition, lo, hi, rows: Number(n) }));
}
