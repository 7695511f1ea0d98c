import { readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import type { DatasetDef, Network } from '../datasets/dataset.js';
import { fsyncFile, mkdirDurable } from './durable.js';
import type { Engine } from './engine.js';
import { writeMergedPartition } from './merge.js';
import { PARTITION_FILE, type LakePaths } from './paths.js';
import { REJECTS_SHAPE, STAGED_PARTITION, datasetShape, stagedColumnsSpec, typedSelectList, type TableShape } from './schema.js';
import { ident, literal, literalList } from './sql.js';
import { testHook } from './test-hooks.js';

export { REJECTS_DATASET } from './schema.js';

export interface CommittedFile {
  dataset: string;
  network: Network;
  partition: string;
  /** Path relative to the lake root. */
  path: string;
  rows: number;
  bytes: number;
  /** Lowest and highest block number in the file, as exact integer text (BIGINT does not fit a JS number). */
  minBlock: string | null;
  maxBlock: string | null;
}

/** A partition file ready in staging: what to rename where, and which stray files of the partition it replaces. */
export interface PreparedFile {
  /** Absolute path of the merged file under `_staging`. */
  from: string;
  /** Absolute path of the partition's `data.parquet`. */
  to: string;
  /** Other Parquet files of the partition, folded into `from` and removed once it is in place. */
  strays: string[];
  file: CommittedFile;
}

export interface PrepareInput {
  engine: Engine;
  paths: LakePaths;
  def: DatasetDef;
  network: Network;
  runId: string;
  ingestedAt: string;
  /** Staged NDJSON files (non-empty) of windows that completed. */
  stagedFiles: string[];
  /** A fresh folder under the run's staging folder for this commit's intermediate files. */
  workDir: string;
}

/** The Parquet files of a partition folder as they are now (absolute paths, sorted). */
export async function partitionParquetFiles(dir: string): Promise<string[]> {
  const names = await readdir(dir).catch(() => [] as string[]);
  return names
    .filter((n) => n.endsWith('.parquet'))
    .sort()
    .map((n) => path.join(dir, n));
}

/**
 * Merges one partition into a file under `workDir` and fsyncs it, so that once the commit is decided the
 * file is on disk whatever happens next.
 */
export async function preparePartition(
  engine: Engine,
  paths: LakePaths,
  shape: TableShape,
  network: Network,
  partition: string,
  fresh: string | undefined,
  workDir: string,
): Promise<PreparedFile> {
  const dir = paths.partitionDir(shape.name, shape.partition, network, partition);
  const to = path.join(dir, PARTITION_FILE);
  const existing = await partitionParquetFiles(dir);
  const from = path.join(workDir, `${shape.name}.${network}.${partition}.parquet`);
  const stats = await writeMergedPartition(engine.conn, shape, { existing, fresh, target: from });
  await fsyncFile(from);
  await testHook('final');
  return {
    from,
    to,
    strays: existing.filter((f) => f !== to),
    file: {
      dataset: shape.name,
      network,
      partition,
      path: paths.relative(to),
      rows: stats.rows,
      bytes: (await stat(from)).size,
      minBlock: stats.minBlock,
      maxBlock: stats.maxBlock,
    },
  };
}

/**
 * Types a dataset's staged rows once into per-partition Parquet, then merges each touched partition with
 * what the lake holds (see writeMergedPartition). Nothing in the lake changes here.
 */
export async function prepareDataset(input: PrepareInput): Promise<PreparedFile[]> {
  const { engine, paths, def, network, runId, ingestedAt, stagedFiles, workDir } = input;
  if (stagedFiles.length === 0) return [];
  const typedDir = path.join(workDir, 'typed');
  const finalDir = path.join(workDir, 'final');
  await mkdirDurable(finalDir);
  await engine.conn.run(
    `COPY (SELECT ${typedSelectList(def, runId, ingestedAt)} FROM read_json(${literalList(stagedFiles)}, format='newline_delimited', columns=${stagedColumnsSpec(def)}))
     TO ${literal(typedDir)} (FORMAT parquet, COMPRESSION snappy, PARTITION_BY (${ident(STAGED_PARTITION)}))`,
  );
  await testHook('typed');
  const prefix = `${STAGED_PARTITION}=`;
  const partitions = (await readdir(typedDir))
    .filter((d) => d.startsWith(prefix))
    .map((d) => decodeURIComponent(d.slice(prefix.length)))
    .sort();
  const shape = datasetShape(def);
  const out: PreparedFile[] = [];
  for (const partition of partitions) {
    const fresh = `SELECT * FROM read_parquet(${literal(path.join(typedDir, prefix + partition, '*.parquet'))}, hive_partitioning = false)`;
    out.push(await preparePartition(engine, paths, shape, network, partition, fresh, finalDir));
  }
  return out;
}

/** Rejects join the day's log partition of `_rejects` (one file per network and run date, merged). */
export async function prepareRejects(input: Omit<PrepareInput, 'def'> & { date: string }): Promise<PreparedFile | undefined> {
  const { engine, paths, network, runId, ingestedAt, stagedFiles, workDir, date } = input;
  if (stagedFiles.length === 0) return undefined;
  await mkdirDurable(workDir);
  const fresh = `SELECT dataset, "window", field, raw_value, reason, CAST(entry AS JSON) AS entry, ${literal(runId)} AS _run_id, CAST(${literal(ingestedAt)} AS TIMESTAMPTZ) AS _ingested_at
    FROM read_json(${literalList(stagedFiles)}, format='newline_delimited',
         columns={'dataset': 'VARCHAR', 'network': 'VARCHAR', 'window': 'VARCHAR', 'field': 'VARCHAR', 'raw_value': 'VARCHAR', 'reason': 'VARCHAR', 'entry': 'VARCHAR'})
    WHERE network = ${literal(network)}`;
  const n = Number((await engine.conn.runAndReadAll(`SELECT count(*)::BIGINT FROM (${fresh})`)).getRowsJS()[0]![0]);
  if (n === 0) return undefined;
  return preparePartition(engine, paths, REJECTS_SHAPE, network, date, fresh, workDir);
}
