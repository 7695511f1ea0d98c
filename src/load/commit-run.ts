import path from 'node:path';
import type { DatasetDef, Network } from '../datasets/dataset.js';
import { Catalog, type WatermarkRecord, type WindowRecord } from './catalog.js';
import { commitDataset, commitRejects, type CommittedFile } from './commit.js';
import type { Engine } from './engine.js';
import type { LakePaths } from './paths.js';

export interface RunRecord {
  job: string;
  startedAt: string;
  finishedAt: string;
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
  /** Staged row files of completed windows, per dataset. */
  datasets: { def: DatasetDef; stagedFiles: string[] }[];
  rejectFiles: string[];
  windows: WindowRecord[];
  /** Advanced only here, after the data they cover is in place. */
  watermarks: WatermarkRecord[];
  /** Datasets whose views to (re)create. */
  viewDefs: DatasetDef[];
  /** Builds the run's record once the files are known (the report counts them). */
  run: (files: readonly CommittedFile[]) => RunRecord;
}

/**
 * Commits a run: merges every dataset's staged rows into its partitions, writes the run's rejects, then
 * records windows, files, watermarks, views and the run in the catalog in one transaction.
 */
export async function commitRun(input: RunCommitInput): Promise<CommittedFile[]> {
  const { engine, paths, runId, ingestedAt, stagingDir, network } = input;
  const files: CommittedFile[] = [];
  let index = 0;
  for (const { def, stagedFiles } of input.datasets) {
    files.push(...(await commitDataset({ engine, paths, def, network, runId, ingestedAt, stagedFiles, workDir: path.join(stagingDir, `commit-${index++}`) })));
  }
  const rejects = await commitRejects({
    engine,
    paths,
    network,
    runId,
    ingestedAt,
    stagedFiles: input.rejectFiles,
    workDir: path.join(stagingDir, 'commit-rejects'),
    date: ingestedAt.slice(0, 10),
  });
  if (rejects) files.push(rejects);

  const run = input.run(files);
  await Catalog.write(engine, paths, async (catalog) => {
    await catalog.recordWindows(input.windows);
    await catalog.recordFiles(runId, files);
    await catalog.advanceWatermarks(runId, input.watermarks);
    await catalog.refreshViews(paths, input.viewDefs);
    await catalog.recordRun(runId, run.job, run.startedAt, run.finishedAt, run.status, run.report);
  });
  return files;
}
