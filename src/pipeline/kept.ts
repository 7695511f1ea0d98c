/**
 * Windows a single-machine run fetched and could not commit for a lake-side reason (another DuckLake writer kept
 * committing to its tables: CHAINLAKE_LAKE_CHANGED; or a user's DuckDB session held `catalog.duckdb` longer than the
 * run would wait), kept for the next run to commit without sending their requests again, as a distributed worker's
 * `fetched` window waits for the next commit (issue 34).
 *
 * The failing run moves each such window's staged files (rows, pages as received, rejects) out of its staging into
 * `_kept/<runId>/`, lists them there (load/write/kept-list.ts), and records the windows `fetched` in the ledger, with
 * a spec naming the files, their sizes and sha256, in the transaction that records the run failed (run.ts); a run
 * whose catalog a user's session held (so that neither its commit nor that record could happen) leaves the list for
 * the next command's recovery to record. The next run resuming that run's chain reads the
 * `fetched` windows (ledger/planning.ts), plans around them, checks every file against its spec, and hands the sound
 * ones to its committer before it fetches anything; their commit moves them `fetched -> committed` (journal.ts). A
 * window whose data is gone or damaged is fetched again and given up (`failed`), never committed in part. Recovery
 * removes a `_kept` folder once no `fetched` window names it (recovery.ts): a kill anywhere leaves either the window
 * `fetched` with its files in place, or its files orphaned and removed.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, rename, stat } from 'node:fs/promises';
import path from 'node:path';
import { Accounting } from '../extract/accounting.js';
import { WindowProgress } from '../extract/pager.js';
import type { KeptRow } from '../load/ledger/windows.js';
import { windowKey } from '../load/ledger/planning.js';
import type { WindowRecord } from '../load/catalog.js';
import type { LakePaths } from '../load/paths.js';
import { encodeCalls } from '../load/ledger/requests.js';
import { PageFiles, StageFile } from '../load/write/staging.js';
import { writeKeptList } from '../load/write/kept-list.js';
import { testHook } from '../load/test-hooks.js';
import { windowOfSpec, windowSpecOf, type WindowSpec } from '../distributed/windows.js';
import { countsOf, type WindowOutcome } from './execute.js';
import type { Window } from './plan.js';
import type { Logger } from './log.js';

/** A kept staged file: where (relative to the lake's root), and what it held when it was kept. */
interface KeptFile {
  path: string;
  bytes: number;
  sha256: string;
  rows: number;
  maxLineBytes: number;
  pageBytes: number;
  extras: boolean;
  upperCaseHex: boolean;
}

/** What the ledger's `spec` holds of a kept window (JSON). */
interface KeptSpec {
  kept: KeptWindowSpec;
}

interface KeptWindowSpec {
  window: WindowSpec;
  /** When the run that kept it started: its rows' `_ingested_at`, as if that run had committed them. */
  ingestedAt: string;
  rows: number;
  receivedRows: number;
  scannedRows: number;
  rejects: number;
  progress: { rowsExpected: number; rowsGot: number; pages: number; capHits: number; splits: number };
  /** What fetching it cost: not sent again by the run that commits it. */
  requests: number;
  files: { rows?: KeptFile; pages: KeptFile[]; entriesAt?: readonly string[]; rejects?: KeptFile };
}

/** What a run kept of its windows, or took over of an earlier run's. */
export interface KeptSummary {
  windows: number;
  rows: number;
  /** The requests that fetched them: not sent again. */
  requests: number;
  /** The windows' ids, in the order they were fetched. */
  ids: string[];
}

export function keptSummaryOf(outcomes: readonly WindowOutcome[]): KeptSummary {
  return {
    windows: outcomes.length,
    rows: outcomes.reduce((a, o) => a + o.rows, 0),
    requests: outcomes.reduce((a, o) => a + (o.kept?.requests ?? o.acct.requests), 0),
    ids: outcomes.map((o) => o.window.id),
  };
}

const specOf = (row: Pick<KeptRow, 'spec'>): KeptWindowSpec | undefined => {
  try {
    return (JSON.parse(row.spec) as Partial<KeptSpec>).kept;
  } catch {
    return undefined;
  }
};

/** A kept window's key across runs (ledger/planning.ts windowKey): planning leaves it out of what it fetches. */
export function keptKeyOf(row: Pick<KeptRow, 'spec'>): string | undefined {
  const w = specOf(row)?.window;
  return w && windowKey(w.dataset, w.network, w.scopeKey, w.range?.from ?? null, w.range?.to ?? null);
}

async function sha256Of(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/**
 * Moves the staged files of `outcomes` (fetched windows of this run that no commit took) from `staging` into the
 * lake's `_kept/<runId>/`, writes their list there (kept-list.ts), and returns their ledger rows (`fetched`, with
 * their specs) for the run's failure record. A window whose files cannot be moved is left out (its files go with the
 * staging, and the next run fetches it again).
 */
export async function keepWindows(
  paths: LakePaths,
  run: { runId: string; job: string; startedAt: string },
  staging: string,
  outcomes: readonly WindowOutcome[],
  log: Logger,
): Promise<{ kept: WindowOutcome[]; rows: WindowRecord[] }> {
  const { runId } = run;
  const kept: WindowOutcome[] = [];
  const rows: WindowRecord[] = [];
  const dir = paths.kept(runId);
  const keep = async (file: StageFile): Promise<KeptFile> => {
    const to = path.join(dir, path.relative(staging, file.file));
    await mkdir(path.dirname(to), { recursive: true });
    await rename(file.file, to);
    const { size } = await stat(to);
    return {
      path: paths.relative(to),
      bytes: size,
      sha256: await sha256Of(to),
      rows: file.rows,
      maxLineBytes: file.maxLineBytes,
      pageBytes: file.pageBytes,
      extras: file.extras,
      upperCaseHex: file.upperCaseHex,
    };
  };
  for (const o of outcomes) {
    try {
      const files: KeptWindowSpec['files'] = {
        ...(o.stage ? { rows: await keep(o.stage) } : {}),
        pages: [],
        ...(o.rejectStage ? { rejects: await keep(o.rejectStage) } : {}),
        ...(o.pagesEntriesAt ? { entriesAt: o.pagesEntriesAt } : {}),
      };
      for (const f of o.pageStage?.files ?? []) files.pages.push(await keep(f));
      const p = o.progress;
      const spec: KeptSpec = {
        kept: {
          window: windowSpecOf(o.window),
          ingestedAt: run.startedAt,
          rows: o.rows,
          receivedRows: o.receivedRows,
          scannedRows: o.scannedRows,
          rejects: o.rejects,
          progress: { rowsExpected: p.rowsExpected, rowsGot: p.rowsGot, pages: p.pages, capHits: p.capHits, splits: p.splits },
          requests: o.acct.requests,
          files,
        },
      };
      const w = o.window;
      rows.push({
        runId,
        windowId: w.id,
        dataset: w.def.name,
        network: w.network,
        scope: w.scopeKey,
        fromBlock: w.range?.from ?? null,
        toBlock: w.range?.to ?? null,
        ...countsOf(o),
        status: 'fetched',
        error: null,
        spec: JSON.stringify(spec),
        requestLog: encodeCalls(o.acct.calls),
      });
      kept.push(o);
    } catch (e) {
      log.log('warn', 'run.keep_failed', `${o.window.id}: its staged data could not be kept (${(e as Error).message}): the next run fetches it again`, {
        window: o.window.id,
      });
    }
  }
  if (rows.length === 0) return { kept, rows };
  // The list, once every file is in place: what recovery records when this run cannot (kept-list.ts).
  try {
    await writeKeptList(paths, { ...run, windows: rows });
  } catch (e) {
    log.log('warn', 'run.keep_failed', `the list of the windows kept could not be written (${(e as Error).message}): the next run fetches them again`, {
      windows: rows.length,
    });
    return { kept: [], rows: [] };
  }
  await testHook('kept');
  return { kept, rows };
}

/** A kept window the run cannot commit: its data gone or damaged (or its spec unreadable). */
export interface LostKept {
  row: KeptRow;
  /** The window to fetch again, when the spec still says which. */
  window?: Window;
  why: string;
}

/**
 * The kept windows of the chain this run resumes, checked file by file against their specs: each sound one as a
 * fetched window to hand to the committer (no request of it is sent again), each other one to fetch again.
 */
export async function takeKept(paths: LakePaths, rows: readonly KeptRow[]): Promise<{ outcomes: WindowOutcome[]; lost: LostKept[] }> {
  const outcomes: WindowOutcome[] = [];
  const lost: LostKept[] = [];
  for (const row of rows) {
    const spec = specOf(row);
    let window: Window | undefined;
    try {
      if (!spec) throw new Error('its record is not a kept window');
      window = windowOfSpec(spec.window);
      if (spec.window.times) window.times = spec.window.times;
      const why = await damageOf(paths, [
        ...(spec.files.rows ? [spec.files.rows] : []),
        ...spec.files.pages,
        ...(spec.files.rejects ? [spec.files.rejects] : []),
      ]);
      if (why) {
        lost.push({ row, window, why });
        continue;
      }
      outcomes.push(outcomeOf(paths, row, window, spec));
    } catch (e) {
      lost.push({ row, ...(window ? { window } : {}), why: (e as Error).message });
    }
  }
  return { outcomes, lost };
}

/** Why a kept window's files are not what it kept (gone, another size, other bytes), or undefined when they are. */
async function damageOf(paths: LakePaths, files: readonly KeptFile[]): Promise<string | undefined> {
  for (const f of files) {
    const file = paths.absolute(f.path);
    const size = await stat(file).then(
      (s) => s.size,
      () => undefined,
    );
    if (size === undefined) return `${f.path} is gone`;
    if (size !== f.bytes) return `${f.path} holds ${size} bytes, ${f.bytes} were kept`;
    if ((await sha256Of(file)) !== f.sha256) return `${f.path} is not the file that was kept (its sha256 differs)`;
  }
  return undefined;
}

function outcomeOf(paths: LakePaths, row: KeptRow, window: Window, spec: KeptWindowSpec): WindowOutcome {
  const staged = (f: KeptFile): StageFile => StageFile.closed(paths.absolute(f.path), f);
  const progress = new WindowProgress();
  Object.assign(progress, spec.progress);
  let pageStage: PageFiles | undefined;
  if (spec.files.pages.length) {
    pageStage = new PageFiles(path.join(paths.kept(row.runId), 'unused'));
    pageStage.files.push(...spec.files.pages.map(staged));
  }
  return {
    window,
    ...(spec.files.rows ? { stage: staged(spec.files.rows) } : {}),
    ...(pageStage ? { pageStage } : {}),
    ...(spec.files.entriesAt ? { pagesEntriesAt: spec.files.entriesAt } : {}),
    ...(spec.files.rejects ? { rejectStage: staged(spec.files.rejects) } : {}),
    // This run sends none of its requests.
    acct: new Accounting(),
    progress,
    rows: spec.rows,
    receivedRows: spec.receivedRows,
    scannedRows: spec.scannedRows,
    rejects: spec.rejects,
    kept: { runId: row.runId, ingestedAt: spec.ingestedAt, requests: spec.requests, requestLog: row.requestLog },
  };
}
