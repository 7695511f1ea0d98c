import path from 'node:path';
import { Accounting } from '../extract/accounting.js';
import { explorerPageFetcher } from '../extract/endpoint.js';
import type { ExplorerClient } from '../extract/explorer.js';
import { pageWindow, WindowProgress, type PageFetcher, type PagerOptions } from '../extract/pager.js';
import { StageFile } from '../load/staging.js';
import type { RowTransformer } from '../transform/rows.js';
import type { Logger } from './log.js';
import type { Window } from './plan.js';

/** The API clients of a run, one per API. */
export interface Clients {
  explorer: ExplorerClient;
}

export interface WindowOutcome {
  window: Window;
  stage?: StageFile;
  rejectStage?: StageFile;
  acct: Accounting;
  progress: WindowProgress;
  rows: number;
  rejects: number;
  error?: string;
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
}

/** The page fetcher of a window's endpoint. */
export function fetcherFor(w: Window, clients: Clients): PageFetcher {
  switch (w.endpoint.api) {
    case 'explorer':
      return explorerPageFetcher(clients.explorer, w.endpoint, w.scope, w.query);
    default:
      throw new Error(`${w.def.name}: the ${w.endpoint.api} API is not wired yet`);
  }
}

/**
 * Fetches one window page by page through the transform into its staged files. A window either completes
 * (its staged rows await the commit) or fails whole: its staged files are discarded and the error recorded.
 */
export async function executeWindow(w: Window, deps: ExecuteDeps): Promise<WindowOutcome> {
  const outcome: WindowOutcome = { window: w, acct: new Accounting(), progress: new WindowProgress(), rows: 0, rejects: 0 };
  try {
    outcome.stage = await StageFile.open(path.join(deps.stagingDir, 'rows', w.def.name, `${deps.index}.ndjson`));
    const fetcher = fetcherFor(w, deps.clients);
    for await (const page of pageWindow(fetcher, w.range, { ...deps.pager }, outcome.acct, outcome.progress)) {
      const { rows, rejects } = deps.transformer.transform(page.entries, w.id, { scope: w.scope, results: page.results });
      await outcome.stage.writeRows(rows);
      outcome.rows += rows.length;
      if (rejects.length) {
        outcome.rejectStage ??= await StageFile.open(path.join(deps.stagingDir, 'rejects', `${deps.index}.ndjson`));
        await outcome.rejectStage.writeRejects(rejects);
        outcome.rejects += rejects.length;
      }
    }
    await outcome.stage.close();
    await outcome.rejectStage?.close();
    if (deps.strict && outcome.rejects > 0) throw new StrictRejectsError(outcome.rejects);
    deps.log.log('debug', 'window.done', `${w.id}: ${outcome.rows} rows`, { window: w.id, rows: outcome.rows, requests: outcome.acct.requests });
  } catch (e) {
    outcome.error = (e as Error).message;
    await outcome.stage?.discard();
    await outcome.rejectStage?.discard();
    outcome.stage = outcome.rejectStage = undefined;
    deps.log.log('error', 'window.failed', `${w.id}: ${outcome.error}`, { window: w.id, error: outcome.error });
  }
  return outcome;
}

export class StrictRejectsError extends Error {
  constructor(readonly rejects: number) {
    super(`${rejects} rows did not convert (strict mode)`);
    this.name = 'StrictRejectsError';
  }
}
