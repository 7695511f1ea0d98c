import { isUtf8 } from 'node:buffer';
import type { EndpointDef } from '../datasets/dataset.js';
import type { Accounting } from './accounting.js';
import { ApiError } from './errors.js';
import type { FetchedPage, PageFetcher, PageRequest, RawPage } from './pager.js';
import { newRequestRecord, type RequestRecord } from './request-log.js';
import type { ListScan, ScannedList } from './scan.js';
import { ChainlakeError, bugError } from '../errors.js';

export type QueryValue = string | number | boolean | undefined;
export type Query = Record<string, QueryValue>;

/** A GET's checked results, with the body as received and where in it the results sit. */
export interface CheckedBody {
  results: unknown;
  bytes: Buffer;
  /** Path from the envelope's root to `results` (`['results']` on the explorer, `[]` on finance). */
  resultsAt: readonly string[];
  /** The list asked for with a scan, when the body was scanned: `results` then holds `[]` in its place. */
  list?: ScannedList;
  /** The envelope's `message`, when it has one (a recorded absence keeps it). */
  message?: string;
}

/** What the generic fetcher needs from an API client: both clients implement it over the shared transport. */
export interface ApiCaller {
  /** GET a path; returns the part of the envelope the endpoints' `entriesAt` is relative to. */
  get(label: string, path: string, query: Query, acct: Accounting, host?: 'main' | 'alt'): Promise<unknown>;
  /** As `get`, with the body's bytes; with `scan` (`at` relative to what `get` returns), the list located in them. */
  /** `record`: the call's lineage record, filled in by the transport (see HttpRequest.record). */
  getBody(label: string, path: string, query: Query, acct: Accounting, host?: 'main' | 'alt', scan?: ListScan, record?: RequestRecord): Promise<CheckedBody>;
  post(label: string, path: string, body: unknown, acct: Accounting, record?: RequestRecord): Promise<unknown>;
}

/** A page plus facts about the call that columns can read as `$meta.<key>`. */
export interface MetaPage extends FetchedPage {
  meta: Record<string, unknown>;
}

/** Fills `{name}` placeholders of a path template from the scope; values are URL-encoded path segments. */
export function fillPath(template: string, scope: Record<string, string>): string {
  return template.replace(/\{(\w+)\}/g, (_, name: string) => {
    const v = scope[name];
    if (v === undefined || v === '') throw bugError(`path ${template} needs '${name}' in the scope`);
    return encodeURIComponent(v);
  });
}

export function dig(value: unknown, at: readonly string[]): unknown {
  let v = value;
  for (const k of at) v = v !== null && typeof v === 'object' ? (v as Record<string, unknown>)[k] : undefined;
  return v;
}

/** Thrown when a success envelope does not have the shape the endpoint promises; never read as an empty page. */
export class ShapeError extends ChainlakeError {
  constructor(endpoint: string, url: string, problem: string) {
    super(`${endpoint}: ${problem} (url=${url})`, { code: 'CHAINLAKE_SHAPE' });
  }
}

/** `results.count` as the API gives it (an integer string; a number where a service slips), or NaN. */
export function countOf(c: unknown): number {
  return typeof c === 'string' && /^\d+$/.test(c) ? Number(c) : typeof c === 'number' && Number.isSafeInteger(c) && c >= 0 ? c : NaN;
}

/**
 * Why a success envelope of a point lookup holds no record, or undefined when it holds one: `results` is null,
 * `{}` or `[]`, or the record where the entries sit is null, `{}` or absent while nothing else is beside it.
 */
export function emptyResultsOf(results: unknown, entriesAt: readonly string[]): string | undefined {
  const empty = (v: unknown): boolean =>
    v === null || v === undefined || (Array.isArray(v) ? v.length === 0 : typeof v === 'object' && Object.keys(v as object).length === 0);
  if (empty(results)) return `results is ${JSON.stringify(results ?? null)}`;
  if (entriesAt.length === 0 || typeof results !== 'object') return undefined;
  const r = results as Record<string, unknown>;
  const others = Object.keys(r).filter((k) => k !== entriesAt[0] && k !== 'message' && k !== 'type');
  return others.length === 0 && empty(dig(r, entriesAt)) ? `results.${entriesAt.join('.')} is empty` : undefined;
}

/**
 * The endpoint's name in messages and stats (retry, throttle and give-up lines): its id, as `chainlake describe
 * --endpoints` lists it and a job's "paths" names it (`account_transactions`, `dashboard_overview`).
 */
export const endpointLabel = (endpoint: EndpointDef): string => endpoint.id;

/** The JSON body of a POST endpoint, from the scope. */
export function buildBody(endpoint: EndpointDef, scope: Record<string, string>): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  for (const [field, spec] of Object.entries(endpoint.body ?? {})) {
    const v = scope[spec.from];
    if (v === undefined) throw bugError(`${endpointLabel(endpoint)}: the body field '${field}' needs '${spec.from}' in the scope`);
    body[field] = spec.list ? v.split(',') : v;
  }
  return body;
}

/** What every page of one endpoint and scope shares: resolved once, when the fetcher is built. */
interface EndpointCall {
  caller: ApiCaller;
  endpoint: EndpointDef;
  scope: Record<string, string>;
  extraQuery: Query;
  host: 'main' | 'alt';
  path: string;
  label: string;
  /** A POST's JSON body. */
  body: Record<string, unknown> | undefined;
  baseMeta: Record<string, unknown>;
  scan: ListScan | undefined;
}

/** What a call returned: the results, and for a GET the body they came from. */
interface Answer {
  results: unknown;
  received?: CheckedBody;
}

/**
 * Builds the page fetcher of a declared endpoint (either API) for one scope: path, fixed, scope and job
 * query, body, block range and paging parameters, and the checks that a page really is a page. An
 * endpoint's declared `absentWhen` failure becomes one empty entry with `found: false` in its meta.
 *
 * With `scanFields`, a GET body is scanned for its entries (see scan.ts) and the values of those fields: the
 * page's entries are then parsed only if something reads them, and `raw.list` says where the values are.
 */
export function endpointPageFetcher(
  caller: ApiCaller,
  endpoint: EndpointDef,
  scope: Record<string, string>,
  extraQuery: Query = {},
  host: 'main' | 'alt' = 'main',
  scanFields?: { fields: readonly string[]; maxBytes?: number },
): PageFetcher {
  const call: EndpointCall = {
    caller,
    endpoint,
    scope,
    extraQuery,
    host,
    path: fillPath(endpoint.path, scope),
    label: endpointLabel(endpoint),
    body: endpoint.method === 'POST' ? buildBody(endpoint, scope) : undefined,
    baseMeta: { endpoint: endpoint.id, ...endpoint.meta },
    scan: scanFields && endpoint.method === 'GET' && endpoint.entriesAt.length > 0 ? { at: endpoint.entriesAt, ...scanFields } : undefined,
  };
  return async (req: PageRequest, acct: Accounting): Promise<MetaPage> => {
    // The window's lineage: one record per call, kept with the window's accounting (its `requests` rows).
    const record = newRequestRecord(endpoint.id);
    acct.calls.push(record);
    let answer: Answer;
    try {
      answer = await send(call, req, acct, record);
    } catch (e) {
      if (!(e instanceof ApiError && isAbsence(endpoint, e))) throw e;
      acct.recordAbsent(e.details.reason);
      return absentPage(record, req, call.baseMeta, e.details.apiMessage ?? null);
    }
    const absence = endpoint.absentWhen?.emptyResults ? emptyResultsOf(answer.results, endpoint.entriesAt) : undefined;
    if (absence) {
      // A success envelope that says "nothing here" (an unverified contract on the real service: HTTP 200,
      // `results: {}` and a message) is the same fact as the refusal above, recorded the same way.
      acct.recordAbsent();
      return absentPage(record, req, call.baseMeta, messageOf(answer) || absence);
    }
    return resultsPage(call, answer, req, record);
  };
}

/** One call of the endpoint for a page: a POST with its body, or a GET with the page's query (and scan). */
async function send(call: EndpointCall, req: PageRequest, acct: Accounting, record: RequestRecord): Promise<Answer> {
  const { caller, endpoint, label, path } = call;
  if (endpoint.method === 'POST') return { results: await caller.post(label, path, call.body, acct, record) };
  const received = await caller.getBody(label, path, pageQuery(endpoint, call.scope, call.extraQuery, req), acct, call.host, call.scan, record);
  return { results: received.results, received };
}

/** The envelope's message (or the results' own), if any. */
function messageOf({ results, received }: Answer): string | null {
  if (received?.message !== undefined) return received.message;
  const m = (results as { message?: unknown } | null)?.message;
  return typeof m === 'string' ? m : null;
}

/** A page of a success envelope's results, checked: its entries (or scanned list), their count, and its meta. */
function resultsPage(call: EndpointCall, { results, received }: Answer, req: PageRequest, record: RequestRecord): MetaPage {
  const { endpoint, label, path } = call;
  if (results === null || typeof results !== 'object' || Array.isArray(results)) {
    throw new ShapeError(label, path, `results is ${results === null ? 'null' : Array.isArray(results) ? 'an array' : typeof results}, expected an object`);
  }
  const r = results as Record<string, unknown>;
  const raw = dig(r, endpoint.entriesAt);
  // A scanned list stands in the results as `[]`: its entries are counted, and parsed only if read.
  const list = received?.list && Array.isArray(raw) && raw.length === 0 ? received.list : undefined;
  const entries = entriesOf(endpoint, raw, label, path);
  const size = list ? list.count : entries.length;
  record.rows = size;
  const count = endpoint.paging.kind === 'none' ? size : listedCount(endpoint, r, size, label, path);
  const meta = { ...call.baseMeta, found: true };
  if (list) return scannedPage(received!, list, endpoint.entriesAt, { results: r, count, offset: req.offset, range: req.range, meta });
  // The bytes stand for the entries only while the entries are the body's own list (not a single object
  // wrapped in one), and only as valid UTF-8 (JSON.parse read a replacement character where they are not):
  // then a consumer may stage the body as received instead of re-serialising the entries.
  const rawPage =
    received && entries === raw && received.resultsAt.length + endpoint.entriesAt.length > 0 && isUtf8(received.bytes)
      ? { bytes: received.bytes, entriesAt: [...received.resultsAt, ...endpoint.entriesAt], entries }
      : undefined;
  return { entries, results: r, count, offset: req.offset, range: req.range, meta, raw: rawPage };
}

/** A GET's query for one page: the endpoint's own, the scope's parameters, paging and the block range. */
function pageQuery(endpoint: EndpointDef, scope: Record<string, string>, extraQuery: Query, req: PageRequest): Query {
  const query: Query = { ...endpoint.query, ...extraQuery };
  for (const [param, key] of Object.entries(endpoint.scopeQuery ?? {})) if (scope[key] !== undefined && scope[key] !== '') query[param] = scope[key];
  if (endpoint.paging.kind === 'offset') {
    query.limit = req.limit;
    query.offset = req.offset;
  } else if (endpoint.paging.kind === 'limit') {
    query.limit = endpoint.paging.maxLimit;
  }
  if (req.range && endpoint.blockRange) {
    query[endpoint.blockRange.start] = req.range.from;
    query[endpoint.blockRange.end] = req.range.to;
  }
  return query;
}

/** A refusal that is the endpoint's way of saying "nothing here" (absentWhen: its status and message). */
function isAbsence(endpoint: EndpointDef, e: ApiError): boolean {
  const a = endpoint.absentWhen;
  return (
    a !== undefined &&
    e.kind === 'terminal' &&
    e.details.httpStatus !== undefined &&
    a.httpStatus.includes(e.details.httpStatus) &&
    a.message.test(e.details.apiMessage ?? '')
  );
}

/** "Nothing here" as a page of one row: `found` false, with what the API said. */
function absentPage(record: { rows: number | null }, req: PageRequest, baseMeta: Record<string, unknown>, message: string | null): MetaPage {
  record.rows = 1;
  return { entries: [{}], results: {}, count: 1, offset: 0, range: req.range, meta: { ...baseMeta, found: false, api_message: message } };
}

/** The page's entries: the list at `entriesAt`, or the single object an endpoint without paging answers with. */
function entriesOf(endpoint: EndpointDef, raw: unknown, label: string, path: string): unknown[] {
  if (Array.isArray(raw)) return raw;
  if (raw !== null && typeof raw === 'object' && endpoint.paging.kind === 'none') return [raw];
  const where = ['results', ...endpoint.entriesAt].join('.');
  throw new ShapeError(
    label,
    path,
    `${where} is ${raw === undefined ? 'missing' : JSON.stringify(raw)?.slice(0, 60)}, expected ${endpoint.paging.kind === 'none' ? 'an object or array' : 'an array'}`,
  );
}

/** The count a listing's page carries (an integer string); an endpoint that cannot page must have returned them all. */
function listedCount(endpoint: EndpointDef, results: Record<string, unknown>, size: number, label: string, path: string): number {
  const countAt = endpoint.countAt ?? ['count'];
  const c = dig(results, countAt);
  const count = countOf(c);
  if (!Number.isSafeInteger(count)) throw new ShapeError(label, path, `results.${countAt.join('.')} is ${JSON.stringify(c)}, expected an integer string`);
  if (endpoint.paging.kind === 'limit' && count > size) {
    throw new ShapeError(label, path, `${count} entries exist but the endpoint cannot page (no offset) and returned ${size}: the listing would be incomplete`);
  }
  return count;
}

/**
 * A page whose body was scanned: its entries are the body's list, parsed from its bytes on first read (by the
 * converters, or the pager when it needs them); the page and its `raw` share that one parsed list.
 */
function scannedPage(received: CheckedBody, list: ScannedList, entriesAt: readonly string[], rest: Omit<MetaPage, 'entries'>): MetaPage {
  let entries: unknown[] | undefined;
  const parsed = (): unknown[] => (entries ??= list.parse());
  const raw: RawPage = {
    bytes: received.bytes,
    entriesAt: [...received.resultsAt, ...entriesAt],
    list,
    get entries() {
      return parsed();
    },
  };
  return {
    ...rest,
    size: list.count,
    raw,
    get entries() {
      return parsed();
    },
  };
}

/** The earlier name of `endpointPageFetcher`, from when only the explorer had one. */
export const explorerPageFetcher = endpointPageFetcher;
