import { readFile, rename } from 'node:fs/promises';
import path from 'node:path';
import { Catalog, type DeclaredTable, type RunRow, type WatermarkRecord, type WindowRecord } from './catalog.js';
import type { CommittedFile } from './commit.js';
import { exists, fsyncDir, mkdirDurable, removeDurable, writeFileDurable } from './durable.js';
import type { Engine } from './engine.js';
import type { LakePaths } from './paths.js';
import { testHook } from './test-hooks.js';
import { eachBounded } from './bounded.js';

const MOVES_AT_ONCE = 16;

/** Name of the commit journal inside a run's staging folder. Its presence means: the commit is decided. */
export const JOURNAL_FILE = 'commit.json';

/**
 * Everything a commit changes, written down (and fsynced) before the lake is touched. Paths are relative to
 * the lake root, so a moved lake still recovers. Applying a journal is idempotent: a move whose source is
 * gone was done, a delete of a missing file is done, and the catalog records are skipped once the run is
 * recorded as committed — so a writer killed at any point after the journal is published has its commit
 * finished by the next command that takes the lake's lock ("roll forward").
 */
export interface CommitJournal {
  format: 1;
  /** `<runId>/<batch>`: unique per commit (a run commits in batches). */
  commitId: string;
  runId: string;
  createdAt: string;
  /** Merged files in staging -> their partition's data.parquet. */
  moves: { from: string; to: string }[];
  /** Stray files of touched partitions, folded into the moved files. */
  deletes: string[];
  catalog: {
    /** The run's record as of this commit (interim while batches go on; final with the last one). */
    run?: RunRow;
    windows: WindowRecord[];
    files: CommittedFile[];
    watermarks: WatermarkRecord[];
    /** Tables beyond the registry declared with the commit (decoded datasets written in it). */
    tables?: DeclaredTable[];
  };
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
  const j = JSON.parse(text) as CommitJournal;
  if (j.format !== 1) throw new Error(`${file}: unknown commit journal format ${String(j.format)}`);
  return j;
}

/**
 * Applies a decided commit: holding the catalog exclusively, renames every merged file over its partition's
 * data.parquet (fsyncing each folder), removes folded strays, then records windows, files, watermarks, views
 * and the run in one catalog transaction. Removes the journal last.
 */
export async function applyJournal(
  engine: Engine,
  paths: LakePaths,
  journal: CommitJournal,
  opts: { recoveredBy?: string; waitMs?: number } = {},
): Promise<void> {
  await Catalog.hold(
    engine,
    paths,
    async (catalog) => {
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
      for (const d of journal.deletes) await removeDurable(paths.absolute(d));
      await testHook('catalog');
      await catalog.transaction(async () => {
        if (!(await catalog.commitApplied(journal.commitId))) {
          const c = journal.catalog;
          await catalog.recordWindows(c.windows);
          await catalog.forgetFiles(journal.deletes);
          await catalog.recordFiles(journal.runId, c.files);
          await catalog.advanceWatermarks(journal.runId, c.watermarks);
          if (c.run) await catalog.recordRun(c.run.runId, c.run.job, c.run.startedAt, c.run.finishedAt, c.run.status, c.run.report);
          await catalog.recordCommit(journal.commitId, journal.runId, c.files, opts.recoveredBy);
        }
        // Idempotent, and before the views are refreshed: a journal finished by recovery declares them too.
        if (journal.catalog.tables) await catalog.registerTables(journal.catalog.tables);
        await catalog.refreshViews();
      });
    },
    { waitMs: opts.waitMs },
  );
  await testHook('committed');
  await removeDurable(journalPath(paths, journal.runId));
}
