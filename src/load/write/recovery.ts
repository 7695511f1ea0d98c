import { readdir, readFile, rm } from 'node:fs/promises';
import { readLedger } from '../quota-ledger.js';
import path from 'node:path';
import { Catalog } from '../catalog.js';
import { exists, removeDurable } from './durable.js';

import { JOURNAL_FILE, applyJournal, readJournal } from './journal.js';
import { LakeLock, LakeLockedError } from '../lock.js';
import type { LakePaths } from '../paths.js';
import { STAGING_INFO_FILE, type StagingInfo } from './staging.js';
import { runsWithKept, windowStates } from '../ledger/windows.js';
import { keptListPath, readKeptList } from './kept-list.js';
import { abandonRunning } from '../ledger/runs.js';

export interface RecoveryReport {
  /** Runs whose decided commit was finished here. */
  finished: string[];
  /** Runs killed before deciding their commit (their staging removed), or whose staging is gone: recorded as abandoned. */
  abandoned: string[];
  /** The catalog's views were rebuilt because the lake had moved. */
  relocated: boolean;
}

/**
 * Brings a lake back to a committed state. Must run under the lake lock, before anything else writes:
 * finishes every decided commit left by a killed writer (journal present), records runs killed before that
 * point as abandoned and deletes their staging (which never was visible), then, in the catalog (settleHeld), records
 * as abandoned the runs still saying `running` whose staging is gone and rebuilds the catalog's views when the lake
 * has moved (unless `relocate` is false: a caller that opens the catalog next does that then, with settleHeld,
 * instead of opening it once more here). Idempotent and itself crash-safe: a kill here leaves the same work for next time.
 */
export async function recoverLake(paths: LakePaths, opts: { currentRunId?: string; by: string; relocate?: boolean }): Promise<RecoveryReport> {
  const report: RecoveryReport = { finished: [], abandoned: [], relocated: false };
  const dirs = (await readdir(paths.stagingRoot).catch(() => [] as string[])).filter((d) => d !== opts.currentRunId).sort();
  const catalogExists = await exists(paths.catalog);
  const kept = await readdir(paths.keptRoot).catch(() => [] as string[]);
  if (dirs.length === 0 && kept.length === 0 && !catalogExists) return report;

  for (const d of dirs) {
    const dir = path.join(paths.stagingRoot, d);
    const journal = await readJournal(path.join(dir, JOURNAL_FILE));
    const info = await readFile(path.join(dir, STAGING_INFO_FILE), 'utf8')
      .then((t) => JSON.parse(t) as StagingInfo)
      .catch(() => undefined);
    if (journal && !(await applyJournal(paths, journal, { recoveredBy: opts.by }))) {
      // Another DuckLake writer changed what the decided commit replaces after it was killed: abandoned, as a run
      // killed before its decision is (applyJournal).
      if (info) await Catalog.write(paths, (c) => c.markAbandoned(info.runId, info.job, info.startedAt));
      report.abandoned.push(journal.runId);
    } else if (journal) {
      report.finished.push(journal.runId);
      // A batch commit records its run as still `running`; the process that would have finished the run
      // is dead, so the run is over: without this it would say `running` forever. (A final commit records
      // the run's real status, which markAbandoned leaves alone.)
      if (info) await Catalog.write(paths, (c) => c.markAbandoned(info.runId, info.job, info.startedAt));
    } else if (info) {
      await Catalog.write(paths, (c) => c.markAbandoned(info.runId, info.job, info.startedAt));
      report.abandoned.push(info.runId);
    }
    // Its quota reservations count as spent: what it sent after its last commit was never recorded.
    const reserved = info ? await readLedger(dir) : undefined;
    if (info && reserved) await Catalog.write(paths, (c) => c.recordReservedUsage(info.runId, reserved));
    await rm(dir, { recursive: true, force: true });
  }
  // After the decided commits above: one of them may have taken kept windows, whose folders go now; first, the lists of
  // runs that could not record what they kept.
  if (kept.length && catalogExists) await recordKeptLists(paths, kept);
  if (kept.length) await removeUnkept(paths, kept, catalogExists);
  if (opts.relocate !== false && (catalogExists || report.finished.length || report.abandoned.length)) {
    const settled = await Catalog.hold(paths, (c) => settleHeld(c, opts.currentRunId));
    report.relocated = settled.relocated;
    report.abandoned.push(...settled.abandoned.filter((r) => !report.abandoned.includes(r)));
  }
  return report;
}

/**
 * recoverLake's last step, on the held catalog (a run does it in its first hold: pipeline/run.ts recordStart): the runs
 * but `currentRunId` still saying `running` are dead, as the caller holds the lake's lock (ledger/runs.ts
 * abandonRunning: a run killed whose staging is gone, which the staging folders above cannot name), and a moved lake's
 * views are rebuilt (Catalog.relocate).
 */
export async function settleHeld(c: Catalog, currentRunId: string | undefined): Promise<{ relocated: boolean; abandoned: string[] }> {
  const abandoned = await abandonRunning({ db: c.lake }, currentRunId);
  return { relocated: await c.relocate(), abandoned };
}

/**
 * Records the kept windows (`fetched`) of each kept list (kept-list.ts) that are not recorded yet, with their run
 * (abandoned, when it still says running: it could not record its end), then removes the list. Idempotent: a kill
 * before the list goes records nothing twice.
 */
async function recordKeptLists(paths: LakePaths, dirs: readonly string[]): Promise<void> {
  for (const d of dirs) {
    const list = await readKeptList(paths, d);
    if (!list) continue;
    await Catalog.write(paths, async (c) => {
      const keys = list.windows.map((w) => ({ runId: w.runId, windowId: w.windowId ?? '' }));
      const recorded = await windowStates({ db: c.lake }, keys);
      await c.recordWindows(list.windows.filter((w) => !recorded.has(`${w.runId}\u0000${w.windowId ?? ''}`)));
      await c.markAbandoned(list.runId, list.job, list.startedAt);
    });
    await removeDurable(keptListPath(paths, d));
  }
}

/**
 * Removes the `_kept` folders (pipeline/kept.ts) no `fetched` window names: what a run kept and a later commit took,
 * or what a run killed (or refused by the catalog) before it recorded its kept windows left behind. The others are
 * left alone: the next run resuming their chain commits them.
 */
async function removeUnkept(paths: LakePaths, dirs: readonly string[], catalogExists: boolean): Promise<void> {
  if (dirs.length === 0) return;
  const live = catalogExists ? await Catalog.hold(paths, (c) => runsWithKept({ db: c.lake })) : new Set<string>();
  for (const d of dirs) if (!live.has(d)) await rm(path.join(paths.keptRoot, d), { recursive: true, force: true });
}

/** removeUnkept for a run that committed (or gave up) kept windows: their folders go once no `fetched` window names them. */
export async function removeTakenKept(paths: LakePaths): Promise<void> {
  await removeUnkept(paths, await readdir(paths.keptRoot).catch(() => [] as string[]), true);
}

/** Whether a reader-side command should try to repair the lake first: a killed writer's commit is pending. */
export async function hasPendingCommit(paths: LakePaths): Promise<boolean> {
  for (const d of await readdir(paths.stagingRoot).catch(() => [] as string[])) {
    if (await exists(path.join(paths.stagingRoot, d, JOURNAL_FILE))) return true;
  }
  return false;
}

/**
 * For commands that only read (query, status): finish a dead writer's commit and fix a moved lake's views, if
 * the lake is free. When a live run holds the lock it will do that itself, so the reader just goes on.
 */
export async function repairIfFree(paths: LakePaths, by: string): Promise<RecoveryReport | undefined> {
  let lock: LakeLock;
  try {
    lock = await LakeLock.acquire(paths.root, by);
  } catch (e) {
    if (e instanceof LakeLockedError) return undefined;
    throw e;
  }
  try {
    return await recoverLake(paths, { by });
  } finally {
    await lock.release();
  }
}
