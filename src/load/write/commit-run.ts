import path from 'node:path';
import type { DatasetDef, Network } from '../../datasets/dataset.js';
import { Catalog, type DeclaredTable, type RunRow, type WindowRecord } from '../catalog.js';
import type { WatermarkRecord } from '../ledger/watermarks.js';
import type { LakeState } from './lake-state.js';
import type { ScopeRange } from './replace.js';
import { datasetShape, REJECTS_SHAPE, type TableShape } from '../schema.js';
import {
  prepareDataset,
  prepareRejects,
  type ClearedPartition,
  type CommittedFile,
  type PreparedDataset,
  type PreparedFile,
  type PreparedRejects,
  type ReplacedRejects,
  type SliceDerivation,
} from './commit.js';
import type { Engine } from '../engine.js';
import { decideAndApply, type CommitJournal, type KeptWindowKey } from './journal.js';
import type { BatchRows } from './batch-rows.js';
import type { LakePaths } from '../paths.js';
import type { StagedPages } from '../schema.js';
import { eachBounded } from '../bounded.js';

const DATASETS_AT_ONCE = 2;

export interface RunRecord {
  job: string;
  startedAt: string;
  /** Null while the run goes on (interim records of batch commits). */
  finishedAt: string | null;
  status: string;
  report: unknown;
}

export interface RunCommitInput {
  engine: Engine;
  paths: LakePaths;
  runId: string;
  ingestedAt: string;
  /** The run's staging folder; commit work happens below it. */
  stagingDir: string;
  network: Network;
  /** Staged row and page files of completed windows, per dataset. */
  /** `replacing`: the dataset's windows fetched again, whose old rows their fresh ones replace (load/write/replace.ts). */
  datasets: { def: DatasetDef; stagedFiles: string[]; pageFiles?: StagedPages[]; replacing?: ScopeRange[] }[];
  /** The same files already typed while the run fetched; read from the files when absent. */
  preloaded?: readonly BatchRows[];
  /** Connections writing partition files at once (see prepareDataset). */
  writers?: number;
  /** Datasets prepared side by side (default DATASETS_AT_ONCE). */
  datasetsAtOnce?: number;
  /** Fresh rows merged at once (see prepareDataset). */
  sliceRows?: number;
  rejectFiles: string[];
  windows: WindowRecord[];
  /** Windows an earlier run kept (`fetched` rows of that run) that this commit takes: see CommitJournal's `kept`. */
  kept?: KeptWindowKey[];
  /** Advanced only here, after the data they cover is in place. */
  watermarks: WatermarkRecord[];
  /** Builds the run's record once the files are known (the report counts them). */
  run: (files: readonly CommittedFile[]) => RunRecord;
  /** Rows derived from one dataset's merge (decoded events), committed in the same journal. */
  derivation?: CommitDerivation;
}

/** Rows a commit derives from one of its datasets' merged slices (see SliceDerivation), committed with it. */
export interface CommitDerivation extends SliceDerivation {
  /** The dataset whose slices it reads. */
  dataset: string;
  /**
   * What it prepared, once every slice is written: its files (fsynced), its rejects (a relation with the
   * `_rejects` columns), the rejects of an earlier commit they replace, and the tables the catalog declares
   * with the commit. Nothing when it failed: the commit then goes on without it.
   */
  prepared(): Promise<
    { files: PreparedFile[]; rejects?: string; replacedRejects?: ReplacedRejects; tables: DeclaredTable[]; cleared?: ClearedPartition[] } | undefined
  >;
}

/** The journal of a set of prepared files: what moves where, and what the catalog records. */
export function journalFor(
  paths: LakePaths,
  commitId: string,
  runId: string,
  prepared: readonly PreparedFile[],
  catalog: Omit<CommitJournal['catalog'], 'files' | 'lake'>,
): CommitJournal {
  return {
    format: 2,
    commitId,
    runId,
    createdAt: new Date().toISOString(),
    moves: prepared.map((p) => ({ from: paths.relative(p.from), to: paths.relative(p.to) })),
    catalog: {
      ...catalog,
      files: prepared.map((p) => p.file),
      lake: prepared.map((p) => ({ table: p.file.dataset, file: { ...p.staged, fullPath: paths.relative(p.to) } })),
    },
  };
}

/**
 * The lake's tables for `shapes` (created when missing, in their own snapshots) and their current files; with
 * `workDir`, partitions another DuckLake writer changed in the catalog are written out there to be merged; `declared`,
 * tables only read, checked as `shapes` are (readLakeState).
 */
export function lakeStateFor(
  paths: LakePaths,
  shapes: readonly TableShape[],
  workDir?: string,
  declared?: readonly TableShape[],
  opts: { decoding?: boolean } = {},
): Promise<LakeState> {
  return Catalog.write(paths, (c) => c.lakeState(shapes, workDir, declared, opts));
}

/**
 * Commits a run in two phases. Prepare: every touched partition is merged into a new file under staging and
 * fsynced (the lake is untouched; a kill here loses only this run's work, which the next run fetches again).
 * Decide, holding the catalog: the journal is written durably. Apply, still holding it: the files are renamed into
 * place and the catalog records the run in one transaction (see decideAndApply). A kill after the decision is
 * finished by the next command; a catalog that stayed locked fails the commit before it is decided.
 * Throws LakeChangedError, having decided nothing, when another DuckLake writer changed a table whose rows the
 * commit replaces after they were read: the caller prepares again (in another `stagingDir`).
 */
export async function commitRun(input: RunCommitInput): Promise<CommittedFile[]> {
  const { paths, runId, stagingDir } = input;
  // The tables this commit writes, and what their partitions hold now. The lake's lock keeps other chainlake
  // commands out, not another DuckLake writer: the decision checks that none changed these tables since.
  const lake = await lakeStateFor(
    paths,
    [...input.datasets.map((d) => datasetShape(d.def)), REJECTS_SHAPE, ...(input.derivation?.shapes ?? [])],
    path.join(stagingDir, 'lake-rows'),
  );
  const perDataset = await prepareDatasets(input, lake);
  const derived = await input.derivation?.prepared();
  const rejects = await prepareRunRejects(input, lake, derived);
  const prepared: PreparedFile[] = [...perDataset.flat(), ...rejects.files];
  // The run's record counts the datasets' files; derived ones are recorded in the catalog with them.
  const files = prepared.map((p) => p.file);
  if (derived) prepared.push(...derived.files);
  const cleared = [...perDataset.flatMap((d) => d.cleared ?? []), ...rejects.cleared, ...(derived?.cleared ?? [])];
  // A run commits in batches, each with its own work folder under the run's staging: that names the commit.
  await decideAndApply(paths, { snapshot: lake.snapshotId, tables: replacedTables(lake, prepared, cleared) }, () =>
    journalFor(paths, `${runId}/${path.basename(stagingDir)}`, runId, prepared, {
      run: runRow(runId, input.run(files)),
      windows: input.windows,
      ...(input.kept?.length ? { kept: input.kept } : {}),
      watermarks: input.watermarks,
      ...(derived ? { tables: derived.tables } : {}),
      ...(cleared.length ? { cleared } : {}),
    }),
  );
  return files;
}

/**
 * The tables (id to name) whose rows a commit of `prepared` files and `cleared` partitions replaces: each file
 * replaces its partition's rows. What decideAndApply checks no other DuckLake writer changed since `lake` was read.
 */
export function replacedTables(lake: LakeState, prepared: readonly PreparedFile[], cleared: readonly ClearedPartition[] = []): Map<number, string> {
  const tables = new Map(prepared.map((p) => [p.staged.tableId, p.file.dataset]));
  for (const c of cleared) tables.set(lake.table(c.table).table.tableId, c.table);
  return tables;
}

/** What the commit's derivation prepared (see CommitDerivation.prepared). */
type Derived = Awaited<ReturnType<CommitDerivation['prepared']>>;

/**
 * Each dataset's touched partitions merged into new files under its own work folder, two datasets at a time: one's
 * sort overlaps the other's file writes (a dataset's first slice otherwise sorted with every writer idle).
 */
async function prepareDatasets(input: RunCommitInput, lake: LakeState): Promise<PreparedDataset[]> {
  const { engine, paths, runId, ingestedAt, stagingDir, network } = input;
  const perDataset = new Array<PreparedDataset>(input.datasets.length);
  await eachBounded(
    input.datasets.map((d, i) => [d, i] as const),
    input.datasetsAtOnce ?? DATASETS_AT_ONCE,
    async ([{ def, stagedFiles, pageFiles, replacing }, i]) => {
      perDataset[i] = await prepareDataset({
        engine,
        paths,
        lake,
        def,
        network,
        runId,
        ingestedAt,
        stagedFiles,
        pageFiles,
        replacing,
        preloaded: input.preloaded,
        writers: input.writers,
        sliceRows: input.sliceRows,
        workDir: path.join(stagingDir, `commit-${i}`),
        derive: input.derivation?.dataset === def.name ? input.derivation : undefined,
      });
    },
  );
  return perDataset;
}

/** The run's rejects, with the derivation's, merged into the day of the run's ingestion. */
function prepareRunRejects(input: RunCommitInput, lake: LakeState, derived: Derived): Promise<PreparedRejects> {
  const { engine, paths, runId, ingestedAt, stagingDir, network } = input;
  return prepareRejects({
    engine,
    paths,
    lake,
    network,
    runId,
    ingestedAt,
    stagedFiles: input.rejectFiles,
    workDir: path.join(stagingDir, 'commit-rejects'),
    more: derived?.rejects,
    replaced: derived?.replacedRejects,
  });
}

/** The catalog's row of the run, from the record its caller builds. */
function runRow(runId: string, r: RunRecord): RunRow {
  return { runId, job: r.job, startedAt: r.startedAt, finishedAt: r.finishedAt, status: r.status, report: r.report };
}
