import path from 'node:path';
import { Accounting } from '../extract/accounting.js';
import { releaseBody } from '../extract/body-pool.js';
import { unreachableOrigin } from '../extract/errors.js';
import { endpointPageFetcher, type MetaPage } from '../extract/endpoint.js';
import type { ExplorerClient } from '../extract/explorer.js';
import type { FinanceClient } from '../extract/finance.js';
import { entryCount, pageWindow, scannedList, WindowProgress, type FetchedPage, type PageFetcher, type PagerOptions } from '../extract/pager.js';
import { PageFiles, StageFile } from '../load/write/staging.js';
import type { StagedPages } from '../load/schema.js';
import { MAX_RECEIVED_PAGE_BYTES, OrdinalState, type RowTransformer } from '../transform/rows.js';
import type { Logger } from './log.js';
import { windowIdOf, type Window } from './plan.js';
import { asksBlockTimes, blockTimes } from './block-times.js';
import type { BlockTimeBook } from '../load/ledger/block-times.js';
import type { BlockRange } from '../extract/pager.js';
import { ChainlakeError, chainlakeCodeOf, bugError } from '../errors.js';
import type { RunReport } from './report.js';
import type { WindowCounts } from '../load/ledger/windows.js';

/** The API clients of a run, one per API. */
export interface Clients {
  /** Built when an explorer base URL is known (a job of finance datasets alone may have none). */
  explorer?: ExplorerClient;
  /** Built when the job has a finance dataset (and the job names a finance base URL). */
  finance?: FinanceClient;
  /** The job's path overrides by endpoint id (job `paths`). */
  paths?: Readonly<Record<string, string>>;
}

/** What a window's attempt counted, as the ledger records it on either kind of lake. */
export function countsOf(o: WindowOutcome): WindowCounts {
  return {
    rowsExpected: o.progress.rowsExpected,
    rowsGot: o.progress.rowsGot,
    rejects: o.rejects,
    requests: o.acct.requests,
    retries: o.acct.retries,
    throttles: o.acct.throttles,
    capHits: o.progress.capHits,
    splits: o.progress.splits,
  };
}

export interface WindowOutcome {
  window: Window;
  stage?: StageFile;
  /** Pages staged as received (see RowTransformer.acceptRaw), and where their entries sit in each body. */
  pageStage?: PageFiles;
  pagesEntriesAt?: readonly string[];
  rejectStage?: StageFile;
  acct: Accounting;
  progress: WindowProgress;
  rows: number;
  /** Of `rows`, those staged as received (the rest went through the converters). */
  receivedRows: number;
  /** Of `receivedRows`, those accepted from a scan of their body, never parsed into objects. */
  scannedRows: number;
  rejects: number;
  error?: string;
  /** With `error`: what the window threw, kept so that its code (not its text) decides what the failure means. */
  failure?: unknown;
  /** With `error`: the origin no request of the window could connect to (see unreachableOrigin). */
  unreachable?: string;
  /**
   * With `error`, when it is an error chainlake raised: the exit code and hint it carries (EXIT.usage for a key the
   * API refuses). A distributed worker, which has no run report, tells a setup problem by it.
   */
  /**
   * A window stopped at the result-window cap (PagerOptions.cutAtCap): the block range left, the next window
   * of the same scope. `window.range` is then narrowed to what this window holds.
   */
  rest?: BlockRange;
  /**
   * A window an earlier run fetched and kept, no commit having taken it (pipeline/kept.ts): the run that kept it
   * (its ledger row stays that run's, `fetched` until this run's commit takes it, and its rows name that run and its
   * start), the requests that fetched it (not sent again), and its calls (JSON text) for the commit to record.
   */
  kept?: { runId: string; ingestedAt: string; requests: number; requestLog: string | null };
}

export interface ExecuteDeps {
  clients: Clients;
  transformer: RowTransformer;
  pager: PagerOptions;
  /** Folder for this window's staged files. */
  stagingDir: string;
  /** Unique within the run; names the staged files. */
  index: number;
  strict: boolean;
  log: Logger;
  /** Live counters the run reads for progress; created here when not given. */
  acct?: Accounting;
  progress?: WindowProgress;
  /** Called after each page is staged, with its row and reject counts. */
  onPage?: (rows: number, rejects: number) => void;
  /** The run's block times shared beyond this process (a distributed run's, in the control plane: see blockTimes). */
  blockTimes?: BlockTimeBook;
}

/**
 * The page fetcher of a window's endpoint: the endpoint's API client, and on testnet its host (#13 has its own).
 * With `scanFields`, bodies are scanned for the values of those entry fields (see RowTransformer.scanFields).
 */
export function fetcherFor(w: Window, clients: Clients, scanFields?: readonly string[]): PageFetcher {
  const scan = scanFields && { fields: scanFields, maxBytes: MAX_RECEIVED_PAGE_BYTES };
  const path = clients.paths?.[w.endpoint.id];
  if (path !== undefined) w = { ...w, endpoint: { ...w.endpoint, path } };
  switch (w.endpoint.api) {
    case 'explorer': {
      const host = w.endpoint.testnetAltHost && w.network === 'testnet' ? 'alt' : 'main';
      if (!clients.explorer)
        throw bugError(`${w.def.name} reads the explorer API, and the job has no explorer client: its check (checkExplorerSource) let it through`);
      return endpointPageFetcher(clients.explorer, w.endpoint, w.scope, w.query, host, scan);
    }
    case 'finance':
      if (!clients.finance) {
        throw bugError(`${w.def.name} reads the finance API, and the job has no finance client: its check (checkFinanceSource) let it through`);
      }
      return endpointPageFetcher(clients.finance, w.endpoint, w.scope, w.query, 'main', scan);
  }
}

/**
 * The pages of a window. Offset-paged endpoints go through the pager (prefetch, result-window splitting,
 * count drift); an endpoint that cannot page is one call, whose completeness the fetcher has checked.
 */
async function* pagesOf(w: Window, fetcher: PageFetcher, pager: PagerOptions, outcome: WindowOutcome): AsyncGenerator<FetchedPage> {
  if (w.endpoint.paging.kind === 'offset') {
    yield* pageWindow(fetcher, w.range, { ...pager }, outcome.acct, outcome.progress);
    return;
  }
  const limit = w.endpoint.paging.kind === 'limit' ? w.endpoint.paging.maxLimit : 1;
  const page = await fetcher({ offset: 0, limit, range: w.range }, outcome.acct);
  outcome.progress.pages++;
  outcome.progress.parts++;
  outcome.progress.rowsExpected += page.count;
  outcome.progress.rowsGot += entryCount(page);
  yield page;
}

/**
 * Fetches one window page by page through the transform into its staged files. A window either completes
 * (its staged rows await the commit) or fails whole: its staged files are discarded and the error recorded.
 */
export async function executeWindow(w: Window, deps: ExecuteDeps): Promise<WindowOutcome> {
  const outcome: WindowOutcome = {
    window: w,
    acct: deps.acct ?? new Accounting(),
    progress: deps.progress ?? new WindowProgress(),
    rows: 0,
    receivedRows: 0,
    scannedRows: 0,
    rejects: 0,
  };
  try {
    const files: StageNames = {
      rows: path.join(deps.stagingDir, 'rows', w.def.name, `${deps.index}.ndjson`),
      pages: path.join(deps.stagingDir, 'pages', w.def.name, String(deps.index)),
      rejects: path.join(deps.stagingDir, 'rejects', `${deps.index}.ndjson`),
    };
    const fetcher = fetcherFor(w, deps.clients, deps.transformer.scanFields(w.endpoint));
    const ordinals = w.def.ordinal ? new OrdinalState() : undefined;
    let generation = 0;
    for await (const page of pagesOf(w, fetcher, deps.pager, outcome)) {
      if ((page.generation ?? 0) > generation) {
        // The pager fetches the window again (its rows moved under us): what came before is dropped, so the
        // staged rows are exactly one consistent listing and ordinals are numbered once.
        generation = page.generation!;
        await discardStages(outcome);
        outcome.rows = outcome.receivedRows = outcome.scannedRows = outcome.rejects = 0;
        ordinals?.restart();
      }
      await stagePage(outcome, page, ordinals, files, deps);
    }
    await finishWindow(outcome, deps);
  } catch (e) {
    outcome.error = (e as Error).message;
    outcome.failure = e;
    outcome.unreachable = unreachableOrigin(e);
    await discardStages(outcome);
    deps.log.log('error', 'window.failed', `${w.id}: ${outcome.error}`, { window: w.id, error: outcome.error });
  }
  return outcome;
}

/** Where a window's staged files go: its converted rows, its pages as received, its rejects. */
interface StageNames {
  rows: string;
  pages: string;
  rejects: string;
}

/** One page staged: as received when the transformer accepts it so, else converted into rows and rejects. */
async function stagePage(outcome: WindowOutcome, page: FetchedPage, ordinals: OrdinalState | undefined, files: StageNames, deps: ExecuteDeps): Promise<void> {
  const w = outcome.window;
  const context = {
    scope: w.scope,
    results: page.results,
    meta: (page as Partial<MetaPage>).meta,
    offset: page.offset,
    fields: w.endpoint.entryFields,
    ordinals,
    raw: page.raw,
    cutFrom: page.cutFrom,
  };
  // A scanned page is accepted on its bytes; one that is not (or was not scanned) is asked of its entries
  // as objects, parsed here if still bytes: exactly what happens without a scan.
  const fromScan = scannedList(page) ? deps.transformer.acceptScanned(context) : undefined;
  const accepted = fromScan ?? deps.transformer.acceptRaw(page.entries, context);
  if (accepted) {
    // Staged as received: no entry is converted or re-serialised here; DuckDB types them at commit.
    // One endpoint per window: every page keeps its entries at the same place.
    outcome.pagesEntriesAt = page.raw!.entriesAt;
    outcome.pageStage ??= new PageFiles(files.pages);
    await outcome.pageStage.writePage(accepted, page.raw!);
    outcome.rows += accepted.rows;
    outcome.receivedRows += accepted.rows;
    if (fromScan) outcome.scannedRows += accepted.rows;
    deps.onPage?.(accepted.rows, 0);
    return;
  }
  const { rows, rejects } = deps.transformer.transform(page.entries, w.id, context);
  // The rows hold values of their own: the body's buffer serves the next body (body-pool.ts).
  if (page.raw) releaseBody(page.raw);
  // Opened at its first rows: most windows stage every page as received and never write one.
  if (rows.length) await (outcome.stage ??= await StageFile.open(files.rows)).writeRows(rows);
  outcome.rows += rows.length;
  if (rejects.length) {
    outcome.rejectStage ??= await StageFile.open(files.rejects);
    await outcome.rejectStage.writeRejects(rejects);
    outcome.rejects += rejects.length;
  }
  deps.onPage?.(rows.length, rejects.length);
}

/**
 * A window whose pages are all in: cut to what it covered when it stopped at its row target (the rest is a window of
 * its own), given its first and last block's times where its rows name no block, and its staged files closed.
 */
async function finishWindow(outcome: WindowOutcome, deps: ExecuteDeps): Promise<void> {
  const w = outcome.window;
  const { covered, rest } = outcome.progress;
  if (covered && rest) {
    outcome.window = { ...w, range: covered, id: windowIdOf(w.def.name, w.network, w.scopeKey, covered) };
    outcome.rest = rest;
  }
  const fetched = outcome.window;
  if (asksBlockTimes(fetched) && fetched.range) {
    // Its rows name no block: the times of its first and last block say which of the lake's rows it replaces.
    if (!deps.clients.explorer)
      throw bugError(
        `${w.def.name}: the block endpoint is needed to replace its rows, and the job has no explorer client: its check (checkExplorerSource) let it through`,
      );
    outcome.window = { ...fetched, times: await blockTimes(deps.clients.explorer, outcome.acct, fetched.range, deps.clients.paths?.block, deps.blockTimes) };
  }
  await outcome.stage?.close();
  await outcome.rejectStage?.close();
  await outcome.pageStage?.close();
  if (deps.strict && outcome.rejects > 0) throw new StrictRejectsError(outcome.rejects);
  deps.log.log('debug', 'window.done', `${w.id}: ${outcome.rows} rows`, {
    window: w.id,
    rows: outcome.rows,
    receivedRows: outcome.receivedRows,
    scannedRows: outcome.scannedRows,
    requests: outcome.acct.requests,
  });
}

/** Drops what a window staged (it failed, or is fetched again from its start). */
async function discardStages(outcome: WindowOutcome): Promise<void> {
  await outcome.stage?.discard();
  await outcome.rejectStage?.discard();
  await outcome.pageStage?.discard();
  outcome.stage = outcome.rejectStage = outcome.pageStage = undefined;
}

export class StrictRejectsError extends ChainlakeError {
  constructor(readonly rejects: number) {
    super(`${rejects} rows did not convert (strict mode)`, { code: 'CHAINLAKE_STRICT_REJECTS' });
  }
}

/** A failed window as its run's report lists it: the message for a person, the code for a program. */
export function failureOf(o: WindowOutcome): RunReport['errors'][number] {
  return { window: o.window.id, error: o.error!, code: chainlakeCodeOf(o.failure) };
}

/** A completed window's non-empty staged files: what a commit (or a stream, or a fragment) types. */
export function stagedOf(o: WindowOutcome): { stagedFiles: string[]; pageFiles: StagedPages[] } {
  return {
    stagedFiles: o.stage && o.stage.rows > 0 ? [o.stage.file] : [],
    pageFiles: (o.pageStage?.files ?? [])
      .filter((f) => f.rows > 0)
      .map((f) => ({ file: f.file, entriesAt: o.pagesEntriesAt!, maxLineBytes: f.maxLineBytes, extras: f.extras, upperCaseHex: f.upperCaseHex })),
  };
}
