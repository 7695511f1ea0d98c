import type { Accounting } from '../extract/accounting.js';
import type { WindowProgress } from '../extract/pager.js';

/** Live counters of one dataset in a run, for progress displays. */
export interface LiveDataset {
  name: string;
  windowsTotal: number;
  windowsDone: number;
  windowsFailed: number;
  rows: number;
  rejects: number;
}

/** A run as it happens: read by progress renderers on their own schedule, written by the run. */
export class LiveRun {
  readonly datasets = new Map<string, LiveDataset>();
  /** Per-window call accounting and paging progress, live objects. */
  readonly windows: { dataset: string; acct: Accounting; progress: WindowProgress }[] = [];
  readonly startedAt = Date.now();

  constructor(
    readonly runId: string,
    readonly job: string,
  ) {}

  dataset(name: string): LiveDataset {
    let d = this.datasets.get(name);
    if (!d) this.datasets.set(name, (d = { name, windowsTotal: 0, windowsDone: 0, windowsFailed: 0, rows: 0, rejects: 0 }));
    return d;
  }

  totals(dataset?: string): { requests: number; retries: number; throttles: number; expected: number } {
    let requests = 0,
      retries = 0,
      throttles = 0,
      expected = 0;
    for (const w of this.windows) {
      if (dataset && w.dataset !== dataset) continue;
      requests += w.acct.requests;
      retries += w.acct.retries;
      throttles += w.acct.throttles;
      expected += w.progress.rowsExpected;
    }
    return { requests, retries, throttles, expected };
  }
}
