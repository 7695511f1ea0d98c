import type { DatasetDef, EndpointDef, Network } from '../datasets/dataset.js';
import { getDataset } from '../datasets/registry.js';
import type { Query } from '../extract/explorer.js';
import type { BlockRange } from '../extract/pager.js';
import type { Job } from './job.js';

/** One unit of fetching, commit, resume and reporting: a dataset, an endpoint, a scope, a block range. */
export interface Window {
  id: string;
  def: DatasetDef;
  endpoint: EndpointDef;
  network: Network;
  scope: Record<string, string>;
  /** Stable text of the scope, the key of watermarks (`address=0x…`). */
  scopeKey: string;
  /** Chain datasets only; snapshot windows are one call (or one paged listing) as of the run. */
  range?: BlockRange;
  query: Query;
}

export const scopeKeyOf = (scope: Record<string, string>): string =>
  Object.entries(scope)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k}=${v}`)
    .join('&') || '-';

/** The closed block range a job covers once the head is pinned. */
export function jobRange(job: Job, head: number): BlockRange {
  return { from: job.range.fromBlock, to: job.range.toBlock === 'head' ? head : Math.min(job.range.toBlock, head) };
}

/** Turns a job into windows, in a stable order (dataset order of the job, then scope order). */
export function planWindows(job: Job, head: number): Window[] {
  const range = jobRange(job, head);
  const windows: Window[] = [];
  for (const ds of job.datasets) {
    const def = getDataset(ds.name);
    const endpoint = def.endpoints[0]!;
    for (const scope of ds.scopes) {
      const scopeKey = scopeKeyOf(scope);
      // A chain window whose range is empty (the pinned head is below the job's first block) has nothing to fetch yet.
      if (def.kind === 'chain' && range.to < range.from) continue;
      const r = def.kind === 'chain' ? range : undefined;
      windows.push({
        id: `${def.name}/${job.network}/${scopeKey}/${r ? `${r.from}-${r.to}` : 'snapshot'}`,
        def,
        endpoint,
        network: job.network,
        scope,
        scopeKey,
        range: r,
        query: ds.query,
      });
    }
  }
  return windows;
}
