/**
 * A window as the control plane stores it (JSON in chainlake.windows.spec) and back: enough for any worker to
 * fetch exactly the window the planner made, with the dataset declarations of its own build.
 */
import { getDataset } from '../datasets/registry.js';
import type { Network } from '../datasets/dataset.js';
import type { BlockRange } from '../extract/pager.js';
import type { Query } from '../extract/endpoint.js';
import { windowIdOf, type Window } from '../pipeline/plan.js';
import { ChainlakeError } from '../errors.js';

export interface WindowSpec {
  dataset: string;
  endpoint: string;
  network: Network;
  scope: Record<string, string>;
  scopeKey: string;
  range: BlockRange | null;
  query: Query;
  /** Window.final (finality), when the job has an unfinal zone. */
  final?: number;
  /** Window.replaces: a provisional window fetched again (finality), or a window `verify --repair` fetches again. */
  replaces?: boolean;
  /** Window.times: set on the spec recorded with the fetched window (finality of a dataset without block numbers). */
  times?: { from: string; to: string };
}

export function windowSpecOf(w: Window): WindowSpec {
  return {
    dataset: w.def.name,
    endpoint: w.endpoint.id,
    network: w.network,
    scope: w.scope,
    scopeKey: w.scopeKey,
    range: w.range ?? null,
    query: w.query,
    ...(w.final === undefined ? {} : { final: w.final }),
    ...(w.replaces ? { replaces: true } : {}),
    ...(w.times ? { times: w.times } : {}),
  };
}

export function windowOfSpec(spec: WindowSpec): Window {
  let def;
  try {
    def = getDataset(spec.dataset);
  } catch {
    throw new ChainlakeError(`a queued window reads dataset ${spec.dataset}, which this chainlake does not know`, {
      hint: 'run the same chainlake version on every worker as the one that enqueued the job',
    });
  }
  const endpoint = def.endpoints.find((e) => e.id === spec.endpoint);
  if (!endpoint) {
    throw new ChainlakeError(`a queued window of ${spec.dataset} reads endpoint ${spec.endpoint}, which this chainlake's ${spec.dataset} does not have`, {
      hint: 'run the same chainlake version on every worker as the one that enqueued the job',
    });
  }
  const range = spec.range ?? undefined;
  return {
    id: windowIdOf(def.name, spec.network, spec.scopeKey, range),
    def,
    endpoint,
    network: spec.network,
    scope: spec.scope,
    scopeKey: spec.scopeKey,
    range,
    query: spec.query,
    ...(spec.final === undefined ? {} : { final: spec.final }),
    ...(spec.replaces ? { replaces: true } : {}),
  };
}
