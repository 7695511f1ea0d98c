// Decoding a lake's event_logs into its decoded-event datasets, through the lake's commit protocol: each
// touched day partition is merged with what it holds (one row per natural key: re-decoding the same logs
// replaces their rows, so decoding is idempotent; its rejects replace those of an earlier decoding of the same
// logs: decode/rejects.ts), the journal is published, then applied under the catalog.

import path from 'node:path';
import { mkdir } from 'node:fs/promises';
import type { Network } from '../datasets/dataset.js';
import { Catalog, type DeclaredTable, type RunRow } from '../load/catalog.js';
import { preparedFile, preparePartition, prepareRejects, type PreparedFile } from '../load/write/commit.js';
import { writeLakeFile } from '../load/write/lake-file.js';
import type { LakeState } from '../load/write/lake-state.js';
import { fsyncFile } from '../load/write/durable.js';
import { eachBounded } from '../load/bounded.js';
import { journalFor, lakeStateFor } from '../load/write/commit-run.js';
import { openEngine, type Engine } from '../load/engine.js';
import { newMaintenanceId } from '../load/ids.js';
import { LakeLock } from '../load/lock.js';
import { recoverLake } from '../load/write/recovery.js';
import { closeRunStaging, openRunStaging } from '../load/write/staging.js';
import { applyJournal, publishJournal } from '../load/write/journal.js';
import type { LakePaths } from '../load/paths.js';
import { REJECTS_SHAPE, type TableShape } from '../load/schema.js';
import { ident, literal, literalList } from '../load/sql.js';
import { allColumns, naturalKey, type DecodedDataset } from './datasets.js';
import { decodeLogs } from './decode.js';
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
  /** Only the event_logs rows this run wrote (decoding inside an export run); all of them otherwise. */
  onlyRunId?: string;
  /** The run's record, for a run of its own (`chainlake decode`); an export run records itself. */
  run?: (report: DecodeReport) => RunRow;
}

export interface DecodeReport {
  logs: number;
  datasets: { name: string; rows: number; partitions: number }[];
  rejects: number;
  /** Logs of another standard's shape (an ERC-721 Transfer when only ERC-20 is decoded): skipped, not rejected. */
  skipped: { shape: string; logs: number }[];
  files: number;
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

export async function decodeLake(input: DecodeLakeInput): Promise<DecodeReport> {
  const { engine, paths, network, datasets, runId, ingestedAt } = input;
  const conn = engine.conn;
  const workDir = path.join(input.stagingDir, `decode-${Date.now().toString(36)}`);
  await mkdir(workDir, { recursive: true });
  const report: DecodeReport = { logs: 0, datasets: datasets.map((d) => ({ name: d.name, rows: 0, partitions: 0 })), rejects: 0, skipped: [], files: 0 };
  const prepared: PreparedFile[] = [];
  const cleared: { table: string; partitionValues: string[] }[] = [];
  const lake = await lakeStateFor(paths, [...datasets.map(decodedShape), REJECTS_SHAPE]);
  const logFiles = lake.tableFiles('event_logs', network);
  if (datasets.length > 0 && logFiles.length > 0) {
    const logs = `SELECT * FROM read_parquet(${literalList(logFiles)}, hive_partitioning = false, union_by_name = true)${input.onlyRunId ? ` WHERE _run_id = ${literal(input.onlyRunId)}` : ''}`;
    const out = await decodeLogs({ conn, logs, datasets, runId, ingestedAt, workDir });
    report.logs = out.logs;
    report.rejects = out.rejectCount;
    report.skipped = skippedList(out.skipped);
    for (const d of datasets) {
      const table = out.tables.get(d.name)!;
      const r = report.datasets.find((x) => x.name === d.name)!;
      r.rows = out.rows.get(d.name) ?? 0;
      if (r.rows === 0) continue;
      const counts = new Map(
        ((await conn.runAndReadAll(`SELECT __partition, count(*)::BIGINT FROM ${table} GROUP BY 1 ORDER BY 1`)).getRowsJS() as [string, bigint][]).map(
          ([p, n]) => [p, Number(n)] as const,
        ),
      );
      r.partitions = counts.size;
      const shape = decodedShape(d);
      // Days the dataset already holds are merged with their files (one row per key); new days are written.
      const fresh: string[] = [];
      for (const p of counts.keys()) {
        if (lake.files(shape.name, network, p).length === 0) {
          fresh.push(p);
          continue;
        }
        const rows = `SELECT * EXCLUDE (__partition) FROM ${table} WHERE __partition = ${literal(p)}`;
        prepared.push(await preparePartition(engine, paths, lake, shape, network, p, rows, workDir));
      }
      prepared.push(...(await newPartitions(engine, paths, lake, shape, network, table, fresh, workDir)));
    }
    // The rejects join the run's day; the days holding rejects they replace are rewritten without those.
    const replaced = await findReplacedRejects(conn, lake, network, datasets, logs);
    const rejects = await prepareRejects({
      engine,
      paths,
      lake,
      network,
      runId,
      ingestedAt,
      stagedFiles: [],
      workDir,
      date: ingestedAt.slice(0, 10),
      more:
        out.rejectCount > 0
          ? `SELECT *, ${literal(runId)} AS _run_id, CAST(${literal(ingestedAt)} AS TIMESTAMPTZ) AS _ingested_at FROM ${out.rejects}`
          : undefined,
      replaced: { keep: KEEP_REJECT, days: replaced },
    });
    prepared.push(...rejects.files);
    cleared.push(...rejects.cleared);
    await dropReplacedRejects(conn);
    for (const t of out.tables.values()) await conn.run(`DROP TABLE IF EXISTS ${t}`);
    await conn.run(`DROP TABLE IF EXISTS ${out.rejects}`);
  }
  report.files = prepared.length;
  // Views for every decoded dataset asked for (empty ones too), declared before the commit refreshes views.
  await Catalog.write(paths, (c) => c.registerTables(declaredTables(datasets)));
  const journal = journalFor(paths, `${runId}/${path.basename(workDir)}`, runId, prepared, {
    run: input.run?.(report),
    windows: [],
    watermarks: [],
    ...(cleared.length ? { cleared } : {}),
  });
  await publishJournal(paths, journal);
  await applyJournal(paths, journal);
  return report;
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
    await openRunStaging(staging, { runId, job: '(decode)', startedAt, pid: process.pid });
    const engine = await openEngine({ tempDir: path.join(staging, 'duckdb-tmp') });
    try {
      const r = await decodeLake({
        engine,
        paths,
        network,
        datasets,
        runId,
        ingestedAt: startedAt,
        stagingDir: staging,
        run: (report) => ({ runId, job: '(decode)', startedAt, finishedAt: new Date().toISOString(), status: 'complete', report }),
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
