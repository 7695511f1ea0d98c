// Decoding a lake's event_logs into its decoded-event datasets, through the lake's commit protocol: each
// touched day partition is merged with what it holds (one row per natural key: re-decoding the same logs
// replaces their rows, so decoding is idempotent; its rejects replace those of an earlier decoding of the same
// logs: decode/rejects.ts), the journal is published, then applied under the catalog.

import type { DuckDBConnection } from '@duckdb/node-api';
import path from 'node:path';
import { mkdir } from 'node:fs/promises';
import type { Network } from '../datasets/dataset.js';
import { Catalog, type DeclaredTable } from '../load/catalog.js';
import { recordRun, type RunRecord } from '../load/ledger/runs.js';
import { preparedFile, preparePartition, prepareRejects, rewritePartition, type PreparedFile } from '../load/write/commit.js';
import type { LakePartitions } from '../load/write/lake-partitions.js';
import { writeLakeFile } from '../load/write/lake-file.js';
import type { LakeState } from '../load/write/lake-state.js';
import { fsyncFile } from '../load/write/durable.js';
import { eachBounded } from '../load/bounded.js';
import { journalFor, lakeStateFor, replacedTables } from '../load/write/commit-run.js';
import { openEngine, type Engine } from '../load/engine.js';
import { newMaintenanceId } from '../load/ids.js';
import { LakeLock } from '../load/lock.js';
import { recoverLake } from '../load/write/recovery.js';
import { closeRunStaging, openRunStaging } from '../load/write/staging.js';
import { decideAndApply, preparedAgain } from '../load/write/journal.js';
import type { LakeChangedError } from '../ducklake/conflicts.js';
import type { LakePaths } from '../load/paths.js';
import { datasetShape, REJECTS_SHAPE, STAGED_PARTITION, type TableShape } from '../load/schema.js';
import { getDataset } from '../datasets/registry.js';
import { ident, literal } from '../load/sql.js';
import { allColumns, naturalKey, type DecodedDataset } from './datasets.js';
import { decodeLogs, distinctDatasets } from './decode.js';
import { dropReplacedRejects, findReplacedRejects, KEEP_REJECT } from './rejects.js';

export interface DecodeLakeInput {
  engine: Engine;
  paths: LakePaths;
  network: Network;
  datasets: readonly DecodedDataset[];
  runId: string;
  ingestedAt: string;
  /** The run's staging folder (the journal goes there). */
  stagingDir: string;
  /**
   * Only the event_logs rows these runs wrote (decoding inside an export run: the run, and the runs whose kept windows
   * it committed, whose rows keep their `_run_id`: pipeline/kept.ts); all of them otherwise.
   */
  onlyRunIds?: readonly string[];
  /** The run's record, for a run of its own (`chainlake decode`: decodeRun); an export run records itself. */
  run?: (report: DecodeReport) => RunRecord;
  /** Hears each time the decoding is prepared again (another DuckLake writer changed its tables meanwhile). */
  again?: (error: LakeChangedError, next: number) => void;
}

export interface DecodeReport {
  logs: number;
  datasets: { name: string; rows: number; partitions: number }[];
  rejects: number;
  /** Logs of another standard's shape (an ERC-721 Transfer when only ERC-20 is decoded): skipped, not rejected. */
  skipped: { shape: string; logs: number }[];
  files: number;
}

/** `runs.job` of a decoding run of its own (`chainlake decode`), on either kind of lake. */
export const DECODE_JOB = '(decode)';

/**
 * A decoding run's row in the ledger's `runs` (load/ledger/runs.ts), the same on both kinds of lake and with the
 * status words of every run: `complete` with what decoding gave and its totals where an export run's report has
 * them (`status` and `report` read rows and rejects there), and the DuckLake snapshot that committed it where the
 * commit numbers it before recording the run (distributed); `failed` with why. Recorded with the decoding's commit,
 * in its catalog transaction, or alone when it fails: a decoding left half way records nothing on a distributed lake
 * (its commit is all or nothing), and a local one is found `abandoned` by the next command's recovery.
 */
export function decodeRun(
  run: { runId: string; startedAt: string; network: Network },
  end: { report: DecodeReport; snapshot?: number } | { error: string },
): RunRecord {
  const { runId, startedAt, network } = run;
  const finishedAt = new Date().toISOString();
  if ('error' in end) return { runId, job: DECODE_JOB, startedAt, finishedAt, status: 'failed', report: { runId, network, error: end.error } };
  const { report } = end;
  const totals = { rows: report.datasets.reduce((n, d) => n + d.rows, 0), rejects: report.rejects, requests: 0 };
  return {
    runId,
    job: DECODE_JOB,
    startedAt,
    finishedAt,
    status: 'complete',
    report: { runId, network, ...report, totals, ...(end.snapshot === undefined ? {} : { snapshot: end.snapshot }) },
  };
}

/** DecodeReport.skipped from the counts by shape. */
export const skippedList = (counts: ReadonlyMap<string, number>): DecodeReport['skipped'] =>
  [...counts].sort(([a], [b]) => a.localeCompare(b)).map(([shape, logs]) => ({ shape, logs }));

/** The report's line on skipped logs: `12 logs of another standard's shape skipped (erc721 Transfer)`; '' when none. */
export function skippedText(skipped: DecodeReport['skipped']): string {
  const n = skipped.reduce((a, s) => a + s.logs, 0);
  if (n === 0) return '';
  const what = skipped.length === 1 ? skipped[0]!.shape : skipped.map((s) => `${s.shape} ${s.logs}`).join(', ');
  return `${n} log${n === 1 ? '' : 's'} of another standard's shape skipped (${what})`;
}

export function decodedShape(d: DecodedDataset): TableShape {
  return {
    name: d.name,
    columns: allColumns(d),
    key: naturalKey(d),
    order: ['timestamp', 'transaction_index', 'log_index', ...(d.exploded ? ['batch_position'] : [])],
    partition: 'block_date',
  };
}

const viewDoc = (d: DecodedDataset): string => `${d.doc} ${d.notes.join(' ')} Natural key: (${naturalKey(d).join(', ')}). Partitioned by network, block_date.`;

/** The catalog's declarations of the decoded datasets (views for every one asked for, empty ones too). */
export const declaredTables = (datasets: readonly DecodedDataset[]): DeclaredTable[] =>
  datasets.map((d) => ({ shape: decodedShape(d), doc: viewDoc(d), partitionDoc: 'UTC date of the block (partition).' }));

/** Connections writing new partitions side by side: each day's COPY is small, and its fixed cost dominates. */
const WRITERS = 2;

/**
 * The partitions the dataset does not have yet, written sorted without the merge's ranking: their rows are
 * one per key already (event_logs holds one row per (transaction_hash, log_index), and a log's rows differ
 * in batch_position). `rows` gives each partition's row count, counted once for all of them.
 */
async function newPartitions(
  engine: Engine,
  paths: LakePaths,
  lake: LakeState,
  shape: TableShape,
  network: Network,
  table: string,
  partitions: readonly string[],
  workDir: string,
): Promise<PreparedFile[]> {
  const columns = shape.columns.map((c) => `CAST(${ident(c.name)} AS ${c.type}) AS ${ident(c.name)}`).join(', ');
  const order = [...shape.order].map(ident).join(', ');
  const writers = await Promise.all(Array.from({ length: Math.min(WRITERS, partitions.length) }, () => engine.connect()));
  const out = new Array<PreparedFile>(partitions.length);
  try {
    await eachBounded(
      partitions.map((p, i) => [p, i] as const),
      writers.length,
      async ([partition, i], w) => {
        const from = path.join(workDir, `${shape.name}.${network}.${partition}.parquet`);
        const written = await writeLakeFile(
          writers[w]!,
          lake.table(shape.name),
          shape,
          { network, value: partition },
          `SELECT ${columns} FROM ${table} WHERE __partition = ${literal(partition)}`,
          from,
          order,
        );
        out[i] = preparedFile(paths, { shape, network, partition }, from, written);
      },
    );
  } finally {
    for (const c of writers) c.closeSync();
  }
  // Side by side once all are written, so that no writer waits on a file's fsync before its next COPY.
  await Promise.all(out.map((f) => fsyncFile(f.from)));
  return out;
}

/** What decoding a lake's event logs gave, for the lake's side to write and commit as one snapshot. */
export interface DecodedLogs {
  /** The decoded datasets that got rows: each one's table (its columns and `__partition`) and rows by day. */
  datasets: { dataset: DecodedDataset; shape: TableShape; table: string; partitions: Map<string, number> }[];
  /** A relation of the `_rejects` rows (with `_run_id` and `_ingested_at`), when there are any. */
  rejects?: string;
  /** `_rejects` partitions holding decode rejects of the same logs, which KEEP_REJECT drops. */
  replacedRejectDays: string[];
  /**
   * Decoding every log of the lake: a condition a decoded dataset's current rows must meet to stay (their log is in
   * the lake: a row whose log a reorganisation took, or another writer deleted, goes), and per dataset the days
   * holding such rows that no decoded row reaches (merged all the same).
   */
  orphans?: { keep: string; days: Map<string, string[]> };
}

/**
 * A lake's side of decoding the event logs it holds (`chainlake decode`): where its logs are, where the earlier
 * rejects they replace are found (as DecodedTarget's), and how the decoded rows are written and committed as one
 * snapshot: the local lake's journal, or the distributed committer's merge under its lease.
 */
export interface ExistingLogsTarget {
  /** The `_rejects` partitions holding decode rejects that decoding `logs` replaces (DecodedTarget's, in-commit.ts). */
  replacedRejects(conn: DuckDBConnection, logs: string): Promise<string[]>;
  /** A relation of the network's event_logs rows (the lake's columns); undefined when the lake holds none. */
  logs: string | undefined;
  /** Writes and commits the decoded rows (`report`: all but its files); returns how many files it wrote. */
  commit(decoded: DecodedLogs, report: DecodeReport): Promise<number>;
  /**
   * What a decoded dataset's partitions hold now, when `logs` are every log of the lake (not one run's): its rows
   * whose log is gone are then found and dropped (DecodedLogs.orphans).
   */
  current?(shape: TableShape): Promise<LakePartitions>;
}

export interface DecodeLogsOfLakeInput {
  conn: DuckDBConnection;
  datasets: readonly DecodedDataset[];
  runId: string;
  ingestedAt: string;
  /** A fresh folder for staged JSON (created). */
  workDir: string;
}

/**
 * Decodes the event logs a lake holds, whichever lake: the logs decoded, the rows of each decoded dataset by
 * day, and the earlier decode rejects they replace are found the same way for both; only the target writes and
 * commits. The decoded tables live until the commit returns.
 */
export async function decodeLakeLogs(input: DecodeLogsOfLakeInput, target: ExistingLogsTarget): Promise<DecodeReport> {
  const { conn, datasets, runId, ingestedAt } = input;
  await mkdir(input.workDir, { recursive: true });
  const report: DecodeReport = { logs: 0, datasets: datasets.map((d) => ({ name: d.name, rows: 0, partitions: 0 })), rejects: 0, skipped: [], files: 0 };
  const decoded: DecodedLogs = { datasets: [], replacedRejectDays: [] };
  if (datasets.length === 0 || target.logs === undefined) {
    report.files = await target.commit(decoded, report);
    return report;
  }
  const logs = target.logs;
  const out = await decodeLogs({ conn, logs, datasets, runId, ingestedAt, workDir: input.workDir });
  try {
    report.logs = out.logs;
    report.rejects = out.rejectCount;
    report.skipped = skippedList(out.skipped);
    for (const d of datasets) {
      const table = out.tables.get(d.name)!;
      const r = report.datasets.find((x) => x.name === d.name)!;
      r.rows = out.rows.get(d.name) ?? 0;
      if (r.rows === 0) continue;
      const partitions = new Map(
        ((await conn.runAndReadAll(`SELECT __partition, count(*)::BIGINT FROM ${table} GROUP BY 1 ORDER BY 1`)).getRowsJS() as [string, bigint][]).map(
          ([p, n]) => [p, Number(n)] as const,
        ),
      );
      r.partitions = partitions.size;
      decoded.datasets.push({ dataset: d, shape: decodedShape(d), table, partitions });
    }
    if (target.current) decoded.orphans = await orphansOf(conn, logs, datasets, decoded, target.current.bind(target));
    // Logs decoded again: their earlier rejects are replaced by these (decode/rejects.ts).
    decoded.replacedRejectDays = await target.replacedRejects(conn, logs);
    if (out.rejectCount > 0)
      decoded.rejects = `SELECT *, ${literal(runId)} AS _run_id, CAST(${literal(ingestedAt)} AS TIMESTAMPTZ) AS _ingested_at FROM ${out.rejects}`;
    report.files = await target.commit(decoded, report);
    return report;
  } finally {
    await dropReplacedRejects(conn);
    await conn.run(`DROP TABLE IF EXISTS ${LOG_KEYS}`);
    for (const t of out.tables.values()) await conn.run(`DROP TABLE IF EXISTS ${t}`);
    await conn.run(`DROP TABLE IF EXISTS ${out.rejects}`);
  }
}

/** The lake's log keys (a plain table: the merge's writers read the keep condition on connections of their own). */
const LOG_KEYS = '__chainlake_decode_log_keys';
const logKey = (alias = ''): string => `${alias}transaction_hash || '/' || CAST(${alias}log_index AS VARCHAR)`;

/**
 * The decoded rows whose log the lake does not hold (DecodedLogs.orphans): the keep condition, and each dataset's
 * days holding such rows where no decoded row of this decoding goes.
 */
async function orphansOf(
  conn: DuckDBConnection,
  logs: string,
  datasets: readonly DecodedDataset[],
  decoded: DecodedLogs,
  current: (shape: TableShape) => Promise<LakePartitions>,
): Promise<NonNullable<DecodedLogs['orphans']>> {
  await conn.run(`CREATE OR REPLACE TABLE ${LOG_KEYS} AS SELECT DISTINCT ${logKey()} AS k FROM (${logs})`);
  const keep = `${logKey()} IN (SELECT k FROM ${LOG_KEYS})`;
  const days = new Map<string, string[]>();
  for (const d of distinctDatasets(datasets)) {
    const lake = await current(decodedShape(d));
    const all = [...new Set((await lake.files()).map((f) => f.partition))];
    const rows = all.length ? await lake.select(all) : undefined;
    if (!rows) continue;
    const written = new Set(decoded.datasets.find((x) => x.dataset.name === d.name)?.partitions.keys() ?? []);
    const found = ((await conn.runAndReadAll(`SELECT DISTINCT ${ident(STAGED_PARTITION)} FROM (${rows}) WHERE NOT (${keep})`)).getRowsJS() as [string][]).map(
      ([p]) => p,
    );
    const more = found.filter((p) => !written.has(p));
    if (more.length) days.set(d.name, more);
  }
  return { keep, days };
}

const EVENT_LOGS = 'event_logs';

/** The event logs of `network` a lake holds, as a relation (undefined when it holds none): what both modes decode. */
export async function lakeLogs(lake: LakeState, network: Network): Promise<string | undefined> {
  if (!lake.has(EVENT_LOGS)) return undefined;
  const rows = lake.partitionsOf(datasetShape(getDataset(EVENT_LOGS)), network);
  const days = [...new Set((await rows.files()).map((f) => f.partition))];
  const all = days.length === 0 ? undefined : await rows.select(days);
  return all === undefined ? undefined : `SELECT * EXCLUDE (${ident(STAGED_PARTITION)}) FROM (${all})`;
}

export function decodeLake(input: DecodeLakeInput): Promise<DecodeReport> {
  const { engine, paths, network, datasets, runId, ingestedAt } = input;
  const name = `decode-${Date.now().toString(36)}`;
  // Another DuckLake writer's commit to a decoded table (or the rejects) since the lake was read: the logs are read
  // and decoded again from the new snapshot, and merged with the new rows, as a run's commit is prepared again.
  return preparedAgain(
    (n) => path.join(input.stagingDir, n === 1 ? name : `${name}-${n}`),
    async (workDir) => {
      // Partitions another DuckLake writer changed are written out to be read and merged, as a commit's are.
      // Every log decoded (not one run's): a decoded table another writer dropped is created again and filled whole.
      const lake = await lakeStateFor(
        paths,
        [...datasets.map(decodedShape), REJECTS_SHAPE],
        path.join(workDir, 'lake-rows'),
        [datasetShape(getDataset(EVENT_LOGS))],
        input.onlyRunIds ? {} : { decoding: true },
      );
      const logs = await lakeLogs(lake, network);
      const target: ExistingLogsTarget = {
        logs: logs && input.onlyRunIds ? `SELECT * FROM (${logs}) WHERE _run_id IN (${input.onlyRunIds.map(literal).join(', ')})` : logs,
        replacedRejects: (conn, logs) => findReplacedRejects(conn, lake, network, datasets, logs),
        // Every log of the lake (not one run's): decoded rows whose log is gone are found and dropped.
        ...(input.onlyRunIds ? {} : { current: async (shape: TableShape) => lake.partitionsOf(shape, network) }),
        commit: (decoded, report) => journalDecoded({ input, lake, workDir }, decoded, report),
      };
      return decodeLakeLogs({ conn: engine.conn, datasets, runId, ingestedAt, workDir }, target);
    },
    {
      ...(input.again ? { again: input.again } : {}),
      runAgain: 'nothing of this decoding was committed (the decoded tables are as they were); decoding again decodes every log the lake then holds',
    },
  );
}

/** A local decoding's rows, rejects and cleared days as one journal, published and applied (ExistingLogsTarget.commit). */
async function journalDecoded(ctx: { input: DecodeLakeInput; lake: LakeState; workDir: string }, decoded: DecodedLogs, report: DecodeReport): Promise<number> {
  const { input, lake, workDir } = ctx;
  const { engine, paths, network, datasets, runId, ingestedAt } = input;
  const prepared: PreparedFile[] = [];
  const cleared: { table: string; partitionValues: string[] }[] = [];
  const keep = decoded.orphans?.keep;
  for (const { shape, table, partitions } of decoded.datasets) {
    // Days the dataset already holds are merged with their files (one row per key); new days are written.
    const fresh: string[] = [];
    for (const p of partitions.keys()) {
      if (lake.files(shape.name, network, p).length === 0) {
        fresh.push(p);
        continue;
      }
      const rows = `SELECT * EXCLUDE (__partition) FROM ${table} WHERE __partition = ${literal(p)}`;
      prepared.push(await preparePartition(engine, paths, lake, shape, network, p, rows, workDir, keep));
    }
    prepared.push(...(await newPartitions(engine, paths, lake, shape, network, table, fresh, workDir)));
  }
  // Days whose decoded rows lost their log, with no row of this decoding: rewritten without them.
  for (const [name, days] of decoded.orphans?.days ?? []) {
    const shape = decodedShape(datasets.find((d) => d.name === name)!);
    for (const p of days) {
      const r = await rewritePartition({ engine, paths, lake, shape, network, partition: p, workDir, keep: keep! });
      if ('from' in r) prepared.push(r);
      else cleared.push(r);
    }
  }
  // The rejects join the run's day; the days holding rejects they replace are rewritten without those.
  const rejects = await prepareRejects({
    engine,
    paths,
    lake,
    network,
    runId,
    ingestedAt,
    stagedFiles: [],
    workDir,
    more: decoded.rejects,
    replaced: { keep: KEEP_REJECT, days: decoded.replacedRejectDays },
  });
  prepared.push(...rejects.files);
  cleared.push(...rejects.cleared);
  // Views for every decoded dataset asked for (empty ones too), declared before the commit refreshes views.
  await Catalog.write(paths, (c) => c.registerTables(declaredTables(datasets)));
  // Another DuckLake writer's commit to a decoded table since it was read fails the decoding instead of being undone.
  await decideAndApply(paths, { snapshot: lake.snapshotId, tables: replacedTables(lake, prepared, cleared) }, () =>
    journalFor(paths, `${runId}/${path.basename(workDir)}`, runId, prepared, {
      run: input.run?.({ ...report, files: prepared.length }),
      windows: [],
      watermarks: [],
      ...(cleared.length ? { cleared } : {}),
    }),
  );
  return prepared.length;
}

/**
 * `chainlake decode`: decodes every event_logs row of a lake already written (history exported before an ABI
 * was known included), under the lake's lock, after recovery, as a run of its own (recorded in `runs`).
 */
export async function decodeExistingLake(paths: LakePaths, network: Network, datasets: readonly DecodedDataset[]): Promise<DecodeReport & { runId: string }> {
  const runId = newMaintenanceId('decode');
  const lock = await LakeLock.acquire(paths.root, runId);
  try {
    await recoverLake(paths, { currentRunId: runId, by: runId });
    const staging = paths.staging(runId);
    const startedAt = new Date().toISOString();
    await openRunStaging(staging, { runId, job: DECODE_JOB, startedAt, pid: process.pid });
    const engine = await openEngine({ tempDir: path.join(staging, 'duckdb-tmp') });
    const run = { runId, startedAt, network };
    try {
      const r = await decodeLake({
        engine,
        paths,
        network,
        datasets,
        runId,
        ingestedAt: startedAt,
        stagingDir: staging,
        run: (report) => decodeRun(run, { report }),
      }).catch(async (error: unknown) => {
        // A commit decided before the failure is finished by recovery, which records the run complete again.
        await Catalog.write(paths, (c) => recordRun({ db: c.lake }, decodeRun(run, { error: (error as Error).message }))).catch(() => undefined);
        throw error;
      });
      return { runId, ...r };
    } finally {
      engine.close();
      await closeRunStaging(staging);
    }
  } finally {
    await lock.release();
  }
}
