import type { EndpointDef } from '../datasets/dataset.js';
import type { Accounting } from './accounting.js';
import type { ExplorerClient, Query } from './explorer.js';
import type { FetchedPage, PageFetcher, PageRequest } from './pager.js';

/** Fills `{name}` placeholders of a path template from the scope; values are URL-encoded path segments. */
export function fillPath(template: string, scope: Record<string, string>): string {
  return template.replace(/\{(\w+)\}/g, (_, name: string) => {
    const v = scope[name];
    if (v === undefined || v === '') throw new Error(`path ${template} needs '${name}' in the scope`);
    return encodeURIComponent(v);
  });
}

function dig(results: unknown, at: readonly string[]): unknown {
  let v = results;
  for (const k of at) v = v !== null && typeof v === 'object' ? (v as Record<string, unknown>)[k] : undefined;
  return v;
}

/** Thrown when a success envelope does not have the shape the endpoint promises; never read as an empty page. */
export class ShapeError extends Error {
  constructor(endpoint: string, url: string, problem: string) {
    super(`${endpoint}: ${problem} (url=${url})`);
    this.name = 'ShapeError';
  }
}

/**
 * Builds the page fetcher of a declared explorer endpoint for one scope: path, fixed and job query, the
 * block-range and paging parameters, and the checks that a page really is a page.
 */
export function explorerPageFetcher(
  client: ExplorerClient,
  endpoint: EndpointDef,
  scope: Record<string, string>,
  extraQuery: Query = {},
  host: 'main' | 'alt' = 'main',
): PageFetcher {
  const path = fillPath(endpoint.path, scope);
  const label = `explorer ${endpoint.ref.split(' ')[0]}`;
  return async (req: PageRequest, acct: Accounting): Promise<FetchedPage> => {
    const query: Query = { ...endpoint.query, ...extraQuery };
    if (endpoint.paging.kind === 'offset') {
      query.limit = req.limit;
      query.offset = req.offset;
    }
    if (req.range && endpoint.blockRange) {
      query[endpoint.blockRange.start] = req.range.from;
      query[endpoint.blockRange.end] = req.range.to;
    }
    const results = await client.get(label, path, query, acct, host);
    if (results === null || typeof results !== 'object' || Array.isArray(results)) {
      throw new ShapeError(label, path, `results is ${results === null ? 'null' : typeof results}, expected an object`);
    }
    const r = results as Record<string, unknown>;
    const raw = dig(r, endpoint.entriesAt);
    let entries: unknown[];
    if (Array.isArray(raw)) entries = raw;
    else if (raw !== null && typeof raw === 'object' && endpoint.paging.kind === 'none') entries = [raw];
    else
      throw new ShapeError(
        label,
        path,
        `results.${endpoint.entriesAt.join('.')} is ${raw === undefined ? 'missing' : JSON.stringify(raw)?.slice(0, 60)}, expected ${endpoint.paging.kind === 'none' ? 'an object or array' : 'an array'}`,
      );
    let count = entries.length;
    if (endpoint.paging.kind === 'offset') {
      const c = r.count;
      count = typeof c === 'string' && /^\d+$/.test(c) ? Number(c) : typeof c === 'number' && Number.isSafeInteger(c) ? c : NaN;
      if (!Number.isSafeInteger(count)) throw new ShapeError(label, path, `results.count is ${JSON.stringify(c)}, expected an integer string`);
    }
    return { entries, results: r, count, offset: req.offset, range: req.range };
  };
}
