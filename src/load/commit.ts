import { mkdir, readdir, rename, stat } from 'node:fs/promises';
import path from 'node:path';
import type { DatasetDef, Network } from '../datasets/dataset.js';
import type { Engine } from './engine.js';
import type { LakePaths } from './paths.js';
import { STAGED_PARTITION, stagedColumnsSpec, typedSelectList } from './schema.js';
import { ident, literal, literalList } from './sql.js';

export interface CommittedFile {
  dataset: string;
  network: Network;
  partition: string;
  /** Path relative to the lake root. */
  path: string;
  rows: number;
  bytes: number;
  minBlock: number | null;
  maxBlock: number | null;
}

export interface CommitInput {
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

const exists = (file: string): Promise<boolean> =>
  stat(file).then(
    () => true,
    () => false,
  );

/**
 * Merges staged rows into the lake, one partition file at a time: the staged rows are typed once into
 * per-partition Parquet, then each touched partition is rewritten as (old file ∪ new rows), one row per
 * natural key (newest wins), sorted, ZSTD — and only when every partition is ready are the new files renamed
 * over the old ones. A crash before a rename leaves the old file; after it, the new one; never a mix inside
 * a file, and a re-run converges because the merge is by key.
 */
export async function commitDataset(input: CommitInput): Promise<CommittedFile[]> {
  const { engine, paths, def, network, runId, ingestedAt, stagedFiles, workDir } = input;
  if (stagedFiles.length === 0) return [];
  const conn = engine.conn;
  const typedDir = path.join(workDir, 'typed');
  const finalDir = path.join(workDir, 'final');
  await mkdir(finalDir, { recursive: true });

  await conn.run(
    `COPY (SELECT ${typedSelectList(def, runId, ingestedAt)} FROM read_json(${literalList(stagedFiles)}, format='newline_delimited', columns=${stagedColumnsSpec(def)}))
     TO ${literal(typedDir)} (FORMAT parquet, COMPRESSION snappy, PARTITION_BY (${ident(STAGED_PARTITION)}))`,
  );

  const prefix = `${STAGED_PARTITION}=`;
  const partitions = (await readdir(typedDir)).filter((d) => d.startsWith(prefix)).map((d) => decodeURIComponent(d.slice(prefix.length)));
  const key = def.naturalKey.map(ident).join(', ');
  const order = def.sortBy.map(ident).join(', ');
  const block = def.blockColumn ? ident(def.blockColumn) : undefined;

  const ready: { final: string; target: string; file: CommittedFile }[] = [];
  for (const partition of partitions.sort()) {
    const target = paths.partitionFile(def, network, partition);
    const final = path.join(finalDir, `${partition}.parquet`);
    const fresh = `SELECT * FROM read_parquet(${literal(path.join(typedDir, prefix + partition, '*.parquet'))}, hive_partitioning=false)`;
    const source = (await exists(target)) ? `${fresh} UNION ALL BY NAME SELECT * FROM read_parquet(${literal(target)}, hive_partitioning=false)` : fresh;
    await conn.run(
      `COPY (
         SELECT * EXCLUDE (__rank) FROM (
           SELECT *, row_number() OVER (PARTITION BY ${key} ORDER BY _ingested_at DESC) AS __rank FROM (${source})
         ) WHERE __rank = 1 ORDER BY ${order}
       ) TO ${literal(final)} (FORMAT parquet, COMPRESSION zstd)`,
    );
    const stats = await conn.runAndReadAll(
      `SELECT count(*)::BIGINT AS n${block ? `, min(${block})::BIGINT AS lo, max(${block})::BIGINT AS hi` : ''} FROM read_parquet(${literal(final)})`,
    );
    const [n, lo, hi] = stats.getRowsJS()[0] as [bigint, bigint | null | undefined, bigint | null | undefined];
    ready.push({
      final,
      target,
      file: {
        dataset: def.name,
        network,
        partition,
        path: paths.relative(target),
        rows: Number(n),
        bytes: (await stat(final)).size,
        minBlock: lo === undefined || lo === null ? null : Number(lo),
        maxBlock: hi === undefined || hi === null ? null : Number(hi),
      },
    });
  }

  for (const r of ready) {
    await mkdir(path.dirname(r.target), { recursive: true });
    await rename(r.final, r.target);
  }
  return ready.map((r) => r.file);
}

export const REJECTS_DATASET = '_rejects';

/** Rejects are an append-only log: one file per run and network, never merged. */
export async function commitRejects(input: Omit<CommitInput, 'def'> & { date: string }): Promise<CommittedFile | undefined> {
  const { engine, paths, network, runId, ingestedAt, stagedFiles, workDir, date } = input;
  if (stagedFiles.length === 0) return undefined;
  await mkdir(workDir, { recursive: true });
  const final = path.join(workDir, `rejects-${network}.parquet`);
  const target = path.join(paths.root, REJECTS_DATASET, `network=${network}`, `run_date=${date}`, `${runId}.parquet`);
  await engine.conn.run(
    `COPY (SELECT dataset, "window", field, raw_value, reason, CAST(entry AS JSON) AS entry, ${literal(runId)} AS _run_id, CAST(${literal(ingestedAt)} AS TIMESTAMPTZ) AS _ingested_at
           FROM read_json(${literalList(stagedFiles)}, format='newline_delimited',
                columns={'dataset': 'VARCHAR', 'network': 'VARCHAR', 'window': 'VARCHAR', 'field': 'VARCHAR', 'raw_value': 'VARCHAR', 'reason': 'VARCHAR', 'entry': 'VARCHAR'})
           WHERE network = ${literal(network)})
     TO ${literal(final)} (FORMAT parquet, COMPRESSION zstd)`,
  );
  const n = Number((await engine.conn.runAndReadAll(`SELECT count(*)::BIGINT FROM read_parquet(${literal(final)})`)).getRowsJS()[0]![0]);
  await mkdir(path.dirname(target), { recursive: true });
  await rename(final, target);
  return {
    dataset: REJECTS_DATASET,
    network,
    partition: date,
    path: paths.relative(target),
    rows: n,
    bytes: (await stat(target)).size,
    minBlock: null,
    maxBlock: null,
  };
}
