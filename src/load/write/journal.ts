import { readFile, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { Catalog, type DeclaredTable, type RunRow, type WindowRecord } from '../catalog.js';
import { raiseWatermarks, type WatermarkRecord } from '../ledger/watermarks.js';
import type { CommittedFile } from './commit.js';
import type { StagedFile } from '../../ducklake/writer.js';
import { ChainlakeError } from '../../errors.js';
import { exists, fsyncDir, mkdirDurable, removeDurable, writeFileDurable } from './durable.js';
import type { LakePaths } from '../paths.js';
import { testHook } from '../test-hooks.js';
import { eachBounded } from '../bounded.js';
import { decodeCalls, insertRequests } from '../ledger/requests.js';
import { moveWindows } from '../ledger/windows.js';
import { againIfLakeChanged, changesSince, LakeChangedError, refuseChangesSince } from '../../ducklake/conflicts.js';

const MOVES_AT_ONCE = 16;

/** Name of the commit journal inside a run's staging folder. Its presence means: the commit is decided. */
export const JOURNAL_FILE = 'commit.json';

/**
 * Everything a commit changes, written down (and fsynced) before the lake is touched. Paths are relative to
 * the lake root, so a moved lake still recovers. Applying a journal is idempotent: a move whose source is
 * gone was done, and the catalog records (the DuckLake snapshot with them) are skipped once the commit is
 * recorded — so a writer killed at any point after the journal is published has its commit finished by the
 * next command that takes the lake's lock ("roll forward"). Nothing is deleted: the files a commit replaces
 * end at its snapshot and stay for time travel until `chainlake maintain` expires it.
 */
export interface CommitJournal {
  format: 2;
  /** `<runId>/<batch>`: unique per commit (a run commits in batches). */
  commitId: string;
  runId: string;
  createdAt: string;
  /** Files in staging -> their new, immutable names in their partitions' folders. */
  moves: { from: string; to: string }[];
  catalog: {
    /** The run's record as of this commit (interim while batches go on; final with the last one). */
    run?: RunRow;
    windows: WindowRecord[];
    /**
     * Windows an earlier single-machine run fetched and kept (its `fetched` rows, pipeline/kept.ts) that this commit
     * lands: moved `fetched -> committed` (or provisional) in its transaction, their calls recorded as that run's.
     */
    kept?: KeptWindowKey[];
    /** What the run's report and the commits table count. */
    files: CommittedFile[];
    /** The DuckLake data files the snapshot adds, each replacing its partition's current files (fullPath relative to the lake root). */
    lake: { table: string; file: StagedFile }[];
    /** Partitions (network, value) whose current files end at the snapshot with no file replacing them: every row went (a re-decoding's rejects). */
    cleared?: { table: string; partitionValues: string[] }[];
    watermarks: WatermarkRecord[];
    /** Tables beyond the registry declared with the commit (decoded datasets written in it). */
    tables?: DeclaredTable[];
    /**
     * The snapshot the replaced partitions were read at, and the tables (ids) whose rows the commit replaces: a
     * recovery checks again that no other DuckLake writer changed them since (see applyJournal). None in a journal
     * of an earlier chainlake.
     */
    readAt?: { snapshot: number; tables: number[] };
  };
}

/** A kept window a commit takes: its row (the run that kept it), whether it lands provisional, its calls (JSON text). */
export interface KeptWindowKey {
  runId: string;
  windowId: string;
  provisional: boolean;
  requestLog: string | null;
}

export function journalPath(paths: LakePaths, runId: string): string {
  return path.join(paths.staging(runId), JOURNAL_FILE);
}

/** The commit point of the protocol: once this returns, the commit will complete (now or on recovery). */
export async function publishJournal(paths: LakePaths, journal: CommitJournal): Promise<void> {
  await writeFileDurable(journalPath(paths, journal.runId), JSON.stringify(journal));
  await testHook('journal');
}

export async function readJournal(file: string): Promise<CommitJournal | undefined> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch {
    return undefined;
  }
  const j = JSON.parse(text) as { format?: unknown };
  if (j.format === 1) {
    throw new ChainlakeError(`${file}: a commit left by a chainlake before the lake became a DuckLake`, {
      hint: 'finish it with the chainlake version that wrote it (any command of it), then run `chainlake catalog rebuild` with this one',
    });
  }
  if (j.format !== 2) {
    throw new ChainlakeError(`${file}: a commit in a journal format this chainlake does not know (${String(j.format)})`, {
      hint: 'a newer chainlake decided it: finish it with that version (any command of it), or upgrade this one',
    });
  }
  return j as CommitJournal;
}

/**
 * Decides a commit and applies it, holding the catalog from before the decision to the end of its catalog
 * transaction: first checks that no other DuckLake writer changed the tables whose rows it replaces since
 * `readAt.snapshot`, the snapshot they were read at (LakeChangedError, and nothing decided, when one did: the caller
 * prepares again). Another writer attaches the catalog to commit, and cannot while it is held, so a decided commit
 * never ends rows it did not read; a kill after the decision releases the catalog, and the recovery checks again
 * (applyJournal: the journal records `readAt`). `journal` builds the journal once the check passed. Returns the
 * snapshot the commit made (none when it changed no table): nothing else committed between `readAt.snapshot` and it,
 * so a command that commits in batches from one read of the lake reads on from there.
 */
export async function decideAndApply(
  paths: LakePaths,
  readAt: { snapshot: number; tables: ReadonlyMap<number, string> },
  journal: () => CommitJournal,
): Promise<number | undefined> {
  await testHook('prepared');
  const { runId, snapshot } = await Catalog.hold(paths, async (catalog) => {
    await refuseChangesSince(catalog.lake, readAt.snapshot, [...readAt.tables.keys()], readAt.tables);
    const j = journal();
    j.catalog.readAt = { snapshot: readAt.snapshot, tables: [...readAt.tables.keys()] };
    await publishJournal(paths, j);
    return { runId: j.runId, snapshot: await applyHeld(paths, catalog, j, {}) };
  });
  await testHook('committed');
  await removeDurable(journalPath(paths, runId));
  return snapshot === false ? undefined : snapshot;
}

/**
 * A commit of this machine's lake (a run's batch, a compaction's batch, a decoding, the reconciliation, a rebuild's
 * batch) prepared again while another DuckLake writer changed the tables it read before its decision (decideAndApply
 * refuses with LakeChangedError; againIfLakeChanged tries at most COMMIT_ATTEMPTS times, then fails with the last).
 * Each attempt reads the lake anew and merges into a work folder of its own (`workDir(n)`), removed when it was
 * refused: nothing of it was decided. After any other failure the folder stays (a decided commit's journal names
 * files in it). `again` hears each retry.
 */
export function preparedAgain<T>(
  workDir: (attempt: number) => string,
  attempt: (workDir: string, n: number) => Promise<T>,
  opts: {
    again?: (error: LakeChangedError, next: number) => void;
    /** The failure's hint after the last attempt: what running the command again does (a run's says what it fetches again). */
    runAgain?: string;
  } = {},
): Promise<T> {
  return againIfLakeChanged(
    async (n) => {
      const dir = workDir(n);
      try {
        return await attempt(dir, n);
      } catch (e) {
        if (e instanceof LakeChangedError) await rm(dir, { recursive: true, force: true });
        throw e;
      }
    },
    opts.again ?? (() => undefined),
  ).catch((e: unknown) => {
    throw e instanceof LakeChangedError && opts.runAgain ? e.fetchedAgain(opts.runAgain) : e;
  });
}

/**
 * Applies a decided commit: holding the catalog exclusively, renames every file to its new name in its
 * partition's folder (fsyncing each folder), then records windows, watermarks, the run and the DuckLake snapshot
 * (new files in, the replaced partitions' files ended) in one catalog transaction, with the views of the new
 * snapshot. Removes the journal last. A recovery (`recoveredBy`) of a commit not yet recorded first checks that no
 * other DuckLake writer changed its tables after it read them (it was killed after its decision, and the catalog was
 * free since): if one did, the commit is abandoned instead (the files it moved are removed; its windows are not
 * recorded, so the next run fetches them again) and this returns false.
 */
export async function applyJournal(paths: LakePaths, journal: CommitJournal, opts: { recoveredBy?: string; waitMs?: number } = {}): Promise<boolean> {
  const applied = (await Catalog.hold(paths, (catalog) => applyHeld(paths, catalog, journal, opts), { waitMs: opts.waitMs })) !== false;
  if (applied) await testHook('committed');
  await removeDurable(journalPath(paths, journal.runId));
  return applied;
}

/**
 * applyJournal's work, on the held catalog: the snapshot the commit made (undefined when it changed no table, or was
 * recorded already), or false when the recovery abandoned it.
 */
async function applyHeld(paths: LakePaths, catalog: Catalog, journal: CommitJournal, opts: { recoveredBy?: string }): Promise<number | undefined | false> {
  const readAt = journal.catalog.readAt;
  if (opts.recoveredBy !== undefined && readAt && !(await catalog.commitApplied(journal.commitId))) {
    if ((await changesSince(catalog.lake, readAt.snapshot, readAt.tables)).length > 0) {
      await Promise.all(journal.moves.map((m) => rm(paths.absolute(m.to), { force: true })));
      return false;
    }
  }
  let renamed = 0;
  // Moves are independent (one file per partition folder), and each waits on a folder fsync: several at
  // once (docs/performance.md, "Commits").
  await eachBounded(journal.moves, MOVES_AT_ONCE, async (m) => {
    const from = paths.absolute(m.from);
    const to = paths.absolute(m.to);
    if (!(await exists(from))) return;
    await mkdirDurable(path.dirname(to));
    await rename(from, to);
    await fsyncDir(path.dirname(to));
    if (renamed++ === 0) await testHook('rename');
  });
  await testHook('catalog');
  let made: number | undefined;
  await catalog.transaction(async () => {
    if (!(await catalog.commitApplied(journal.commitId))) {
      const c = journal.catalog;
      await catalog.recordWindows(c.windows);
      // Each window's calls with it (lineage); a journal written before lineage has none.
      await insertRequests(
        catalog.lake,
        c.windows.flatMap((w) => (w.windowId !== undefined && w.calls?.length ? [{ runId: w.runId, windowId: w.windowId, calls: w.calls }] : [])),
      );
      const snapshot = await catalog.commitLake(journal.commitId, c.lake, c.cleared);
      if (snapshot !== undefined) await catalog.expireInterim(journal.runId, snapshot);
      made = snapshot;
      if (c.kept?.length) await landKept(catalog, c.kept, snapshot);
      await raiseWatermarks({ db: catalog.lake }, journal.runId, c.watermarks);
      if (c.run) await catalog.recordRun(c.run.runId, c.run.job, c.run.startedAt, c.run.finishedAt, c.run.status, c.run.report);
      await catalog.recordCommit(journal.commitId, journal.runId, c.files, opts.recoveredBy);
    }
    // Idempotent, and before the views are refreshed: a journal finished by recovery declares them too.
    if (journal.catalog.tables) await catalog.registerTables(journal.catalog.tables);
    await catalog.refreshViews({ tables: new Set([...journal.catalog.lake, ...(journal.catalog.cleared ?? [])].map((l) => l.table)) });
  });
  // Still holding the catalog: no reader is mid-query on a file it deletes.
  await catalog.deleteScheduled();
  return made;
}

/** The kept windows a commit took: `fetched -> committed | provisional` (strict: a kept row is its run's alone), their calls recorded. */
async function landKept(catalog: Catalog, kept: readonly KeptWindowKey[], snapshot: number | undefined): Promise<void> {
  const ledger = { db: catalog.lake };
  for (const provisional of [false, true]) {
    const some = kept.filter((k) => k.provisional === provisional);
    if (some.length)
      await moveWindows(ledger, some, provisional ? 'provisional' : 'committed', {
        from: ['fetched'],
        set: { snapshot_id: snapshot ?? null, request_log: null },
        strict: true,
      });
  }
  await insertRequests(
    catalog.lake,
    kept.map((k) => ({ runId: k.runId, windowId: k.windowId, calls: decodeCalls(k.requestLog) })),
  );
}
