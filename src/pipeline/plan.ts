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
  /** Endpoints with a block filter only; other windows are one call (or one paged listing) as of the run. */
  range?: BlockRange;
  query: Query;
}

export const scopeKeyOf = (scope: Record<string, string>): string =>
  Object.entries(scope)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k}=${v}`)
    .join('&') || '-';

/** A window's id: readable, and the same for the same dataset, network, scope and range in every run. */
export const windowIdOf = (dataset: string, network: string, scopeKey: string, range: BlockRange | undefined): string =>
  `${dataset}/${network}/${scopeKey}/${range ? `${range.from}-${range.to}` : 'snapshot'}`;

/** The closed block range a job covers once the head is pinned. */
export function jobRange(job: Job, head: number): BlockRange {
  return { from: job.range.fromBlock, to: job.range.toBlock === 'head' ? head : Math.min(job.range.toBlock, head) };
}

/**
 * The scope key of a window: its scope values, plus the endpoint when the dataset has several (two endpoints
 * of one scope are separate windows with separate watermarks and resume records).
 */
export function windowScopeKey(def: DatasetDef, endpoint: EndpointDef, scope: Record<string, string>): string {
  return scopeKeyOf(def.endpoints.length > 1 ? { ...scope, endpoint: endpoint.id } : scope);
}

/**
 * Turns a job into windows, in a stable order (dataset order of the job, then endpoint, then scope order).
 * An endpoint with a block filter gets the job's range (nothing when the pinned head is below the job's
 * first block); any other endpoint is one listing or call as of the run.
 */
export function planWindows(job: Job, head: number): Window[] {
  const range = jobRange(job, head);
  const windows: Window[] = [];
  for (const ds of job.datasets) {
    const def = getDataset(ds.name);
    for (const id of ds.endpoints) {
      const endpoint = def.endpoints.find((e) => e.id === id);
      if (!endpoint) throw new Error(`dataset ${def.name} has no endpoint ${id}`);
      const r = endpoint.blockRange ? range : undefined;
      if (r && r.to < r.from) continue;
      for (const scope of ds.scopes[endpoint.scope] ?? []) {
        const scopeKey = windowScopeKey(def, endpoint, scope);
        windows.push({ id: windowIdOf(def.name, job.network, scopeKey, r), def, endpoint, network: job.network, scope, scopeKey, range: r, query: ds.query });
      }
    }
  }
  return windows;
}
