/**
 * The list of windows a failed run kept (pipeline/kept.ts), written beside their files as `_kept/<runId>/kept.json`
 * before the run records them: a run whose catalog stayed locked by a user's session cannot record them, and a run
 * killed after keeping them did not. The next command's recovery records the windows of a list (`fetched`, the ones
 * not recorded yet) and the run, then removes the list: the ledger's rows are what the next run reads.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { WindowRecord } from '../catalog.js';
import type { LakePaths } from '../paths.js';
import { writeFileDurable } from './durable.js';

export const KEPT_LIST_FILE = 'kept.json';

export interface KeptList {
  runId: string;
  job: string;
  startedAt: string;
  /** The windows' ledger rows, `fetched`, with their specs. */
  windows: WindowRecord[];
}

export const keptListPath = (paths: LakePaths, runId: string): string => path.join(paths.kept(runId), KEPT_LIST_FILE);

export async function writeKeptList(paths: LakePaths, list: KeptList): Promise<void> {
  await writeFileDurable(keptListPath(paths, list.runId), JSON.stringify(list));
}

/** The list in `_kept/<runId>/`, or undefined when there is none (recorded already, or never written whole). */
export async function readKeptList(paths: LakePaths, runId: string): Promise<KeptList | undefined> {
  const text = await readFile(keptListPath(paths, runId), 'utf8').catch(() => undefined);
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text) as KeptList;
  } catch {
    return undefined;
  }
}
