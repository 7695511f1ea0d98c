import { readFileSync } from 'node:fs';
import { jobSchema, SCOPE_KEYS } from './job-schema.js';
import { COMMIT_OPTIONS, RANGE_OPTIONS, RETRY_OPTIONS, TIMEOUT_OPTIONS, TOP_OPTIONS, type JobOption } from './job-options.js';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { datasetNames, DATASETS } from '../datasets/registry.js';
import { scopeKindsOf, type DatasetDef, type Network, type ScopeKind } from '../datasets/dataset.js';
import type { Query } from '../extract/explorer.js';
import type { RetryPolicy, Timeouts } from '../extract/transport.js';
import { cronProblem } from '../schedule/cron.js';
import { toChecksumAddress } from '../evm/keccak.js';
import { ChainlakeError, nearestName, bugError } from '../errors.js';
import { parseDecodeSpec, type DecodeSpec } from '../decode/spec.js';

/** A job file problem: which file, where inside it, and what is wrong. Exit code 2. */
export class JobError extends ChainlakeError {
  constructor(
    readonly file: string,
    readonly where: string,
    readonly problem: string,
  ) {
    // `export` builds its job from flags: there is no file to blame.
    super(
      file === 'command line' ? `invalid arguments: ${where ? `${where}: ` : ''}${problem}` : `job file error: ${file}: ${where ? `${where}: ` : ''}${problem}`,
      {
        code: 'CHAINLAKE_JOB_INVALID',
      },
    );
  }
}

export interface SimulatorTarget {
  kind: 'simulator';
  seed?: number;
  scale?: 'small' | 'medium' | 'large';
  /** `real`: the simulator behaves as the real services do where they differ from the spec. */
  dialect?: 'spec' | 'real';
  /** 'sparse': the simulator's chain of realistic height (head 53,450,000); default the small demo chain. */
  chain?: 'demo' | 'sparse';
}

export interface ApiTarget {
  kind: 'api';
  /** Absent only when the job has no explorer dataset (finance alone). */
  explorer?: string;
  explorerAlt?: string;
  finance?: string;
}

/** The values of one scope, e.g. { address: '0x…' }; an endpoint's path, query or body reads them. */
export type ScopeValues = Record<string, string>;

export interface DatasetJob {
  name: string;
  /** Scopes by kind; each endpoint gets one window family per scope of its own kind, e.g. address: [{ address: '0x…' }]. */
  scopes: Partial<Record<ScopeKind, ScopeValues[]>>;
  /** Ids of the endpoints to fetch: the job's `endpoints`, else every non-alternate endpoint that has scopes. */
  endpoints: string[];
  /** Extra query parameters the job asks for (e.g. input=true). */
  query: Query;
}

/**
 * The blocks a job covers. Explicit: `[fromBlock, toBlock]` (toBlock `head` = the head pinned at run start).
 * Incremental: each scope continues from its watermark, minus `safetyMarginBlocks` (refetched in case the
 * chain reorganised), up to the pinned head; a scope without a watermark starts at `fromBlock`.
 */
export interface JobRange {
  fromBlock: number;
  toBlock: number | 'head';
  incremental: boolean;
  safetyMarginBlocks: number;
  /**
   * Blocks below the head that may still be reorganised or not yet indexed (range.finalityDepth, --finality-depth;
   * default: defaultFinalityDepth). Windows reaching above `head - finalityDepth` are committed as provisional,
   * watermarks stop at that block, and the next run fetches those windows again and replaces their rows. 0: the
   * head is final, nothing is provisional and rows are merged by key only.
   */
  finalityDepth: number;
  /**
   * Block-ranged windows are cut into chunks of this many blocks, aligned to its multiples, and fetched in
   * block order: the unit of resume, and what keeps each batch commit to a few daily partitions.
   */
  windowBlocks: number;
  /** The chain head to use, as the user knows it: nothing is asked to find it (`--head` overrides it). */
  head?: number;
  /** Where a search for the head starts when `latest` is refused and the catalog records no earlier head. */
  headHint?: number;
  /**
   * Whether windows are fixed chunks of `windowBlocks` (set explicitly, in the job or with --window-blocks):
   * each chunk is then asked on its own, empty or not. Otherwise (the default) the chunks of a scope are joined
   * and asked whole, and the run cuts them into count-sized windows (see joinWindows): about ceil(rows / 1000)
   * requests per scope whatever the chain's height.
   */
  fixedChunks?: boolean;
}

/**
 * Default chunk: 100,000 blocks, about 14 days at 12-second blocks. Large enough that an incremental run is
 * one chunk per scope (two when it straddles a boundary) and a full backfill costs one extra request (the
 * chunk's first page or count) per 100,000 blocks and scope; small enough that a batch commit touches two or
 * three weeks of daily partitions and a kill loses at most one chunk per window in flight. docs/lake.md.
 */
export const DEFAULT_WINDOW_BLOCKS = 100_000;

/**
 * What a job fetches: the planner's concern (plan.ts, prepare.ts, enqueue's planning) and the decoder's. Which
 * network, which datasets with their scopes, which blocks, and which decoded datasets to write from the logs.
 */
export interface JobWhat {
  readonly network: Network;
  readonly datasets: readonly DatasetJob[];
  readonly range: JobRange;
  /** Decoded-event datasets written in the same run, from the logs it exported (src/decode). */
  readonly decode?: DecodeSpec;
}

/**
 * Where a job reads from and how politely: the source setup's concern (source.ts: the target, its clients, the
 * transport), the pager's (page size, result window, prefetch) and the request quota's.
 */
export interface JobSource {
  /** The network whose explorer it reads (the same value as `what.network`). */
  readonly network: Network;
  readonly target: SimulatorTarget | ApiTarget;
  /** Never logged, printed or stored. */
  readonly apiKey?: string;
  /**
   * Paths that replace an endpoint's default, by endpoint id (`chainlake describe --endpoints`): a deployment
   * may serve an endpoint elsewhere (the real finance service names its coin in the stable chart's path).
   */
  readonly paths: Readonly<Record<string, string>>;
  readonly concurrency: number;
  readonly rps?: number;
  /** Requests the rate limiter may send at once above `rps` (default: a tenth of rps). */
  readonly burst?: number;
  /** Retry policy of every call (defaults in docs/extract.md). */
  readonly retry: Partial<RetryPolicy>;
  /** Connect, header, body and whole-attempt timeouts of every call. */
  readonly timeouts: Partial<Timeouts>;
  readonly pageSize: number;
  readonly resultWindow: number;
  /** The API plan's requests per day, if it has one: `chainlake plan` shows a run's share of it. */
  readonly dailyRequestQuota?: number;
}

/** Into which lake a job writes, and how: the committer's concern (when it commits; whether a reject fails the run). */
export interface JobLake {
  /** The lake folder: the job's `lake`, or what `--lake` / $CHAINLAKE_LAKE chose at resolution. */
  readonly dir: string;
  /** When a run commits what it has fetched so far (a killed run keeps what it committed). */
  readonly commit: { readonly everyRows: number; readonly everySeconds: number };
  readonly strict: boolean;
}

/**
 * A job resolved once (parseJob), deeply frozen, by concern: `what` to fetch, its `source`, the `lake` it
 * writes, and its `schedule`. A stage takes only the concern(s) it uses; flags are applied at resolution
 * (JobOverrides), never by editing a resolved job.
 */
export interface Job {
  readonly name: string;
  readonly file: string;
  readonly what: JobWhat;
  readonly source: JobSource;
  readonly lake: JobLake;
  /** Cron expression (UTC) for `chainlake schedule`. */
  readonly schedule?: string;
}

/**
 * What the command line says over a job's values (`--lake`, `--concurrency`, `--rps`, `--strict`,
 * `--window-blocks`, `--finality-depth`), applied once when the job is resolved. The CLI checks each flag's
 * bounds first (a usage error names the flag).
 */
export interface JobOverrides {
  lake?: string;
  concurrency?: number;
  rps?: number;
  strict?: boolean;
  windowBlocks?: number;
  finalityDepth?: number;
}

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;

/**
 * Why a value is not a usable address, or undefined. A mixed-case address carries an EIP-55 checksum: one
 * that does not match is a typo (a changed digit), which would silently export some other account.
 */
export function addressProblem(a: unknown): string | undefined {
  if (typeof a !== 'string' || !ADDRESS.test(a)) return `not an address (0x + 40 hex digits): ${JSON.stringify(a)}`;
  const body = a.slice(2);
  if (!/[a-f]/.test(body) || !/[A-F]/.test(body)) return undefined;
  const expected = toChecksumAddress(a.toLowerCase());
  if (expected === a) return undefined;
  return `${a} is mixed-case but its EIP-55 checksum does not match (expected ${expected}): check the address for a typo, or write it all in lower case`;
}
const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;
const NETWORKS: readonly Network[] = ['mainnet', 'testnet'];

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);

/** ` (did you mean "x"?)` for the nearest of `known` when it is near enough to be a typo, else nothing. */
export function didYouMean(given: string, known: readonly string[]): string {
  const best = nearestName(given, known);
  return best === undefined ? '' : ` (did you mean "${best}"?)`;
}

/** The environment variables that name each network's base URL (used when the job does not). */
export const ENDPOINT_ENV = {
  mainnet: 'CHAINLAKE_MAINNET_URL',
  testnet: 'CHAINLAKE_TESTNET_URL',
  testnetAlt: 'CHAINLAKE_TESTNET_ALT_URL',
  finance: 'CHAINLAKE_FINANCE_URL',
} as const;

export class Reader {
  constructor(readonly file: string) {}
  fail(where: string, problem: string): never {
    throw new JobError(this.file, where, problem);
  }
  int(v: unknown, where: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
    if (typeof v !== 'number' || !Number.isInteger(v)) this.fail(where, `must be an integer, got ${JSON.stringify(v)}`);
    if (v < min || v > max) this.fail(where, `must be between ${min} and ${max}, got ${v}`);
    return v;
  }
  str(v: unknown, where: string): string {
    if (typeof v !== 'string' || v === '') this.fail(where, `must be a non-empty string, got ${JSON.stringify(v)}`);
    return v;
  }
  bool(v: unknown, where: string): boolean {
    if (v !== true && v !== false) this.fail(where, 'must be true or false');
    return v;
  }
  keys(o: Obj, where: string, allowed: readonly string[]): void {
    for (const k of Object.keys(o)) {
      if (!allowed.includes(k)) this.fail(where ? `${where}.${k}` : k, `unknown key${didYouMean(k, allowed)}; expected one of: ${allowed.join(', ')}`);
    }
  }
}

const HASH = /^0x[0-9a-fA-F]{64}$/;
const BLOCK_RANGE = /^(\d+)\s*-\s*(\d+)$/;
/** Block scopes are one call each: a job naming more is almost certainly a mistake (use a chain dataset). */
export const MAX_BLOCK_SCOPES = 100_000;
/** The spec's bound on addresses per POST balance call (#1). */
export const BALANCE_BATCH = 20;
const CHART_UNITS = ['minute', 'hour', 'day'];

export { SCOPE_KEYS };

function list(r: Reader, v: unknown, where: string, what: string): unknown[] {
  if (!Array.isArray(v) || v.length === 0) r.fail(where, `must be a non-empty list of ${what}`);
  return v;
}

/**
 * A list given inline, or as `{"file": "path"}`: one item per line, `#` starts a comment, blank lines are
 * skipped. A relative path is relative to the job file's folder. Problems name the file and line.
 */
function listOrFile(r: Reader, v: unknown, where: string, what: string): { items: unknown[]; at: (i: number) => string } {
  if (isObj(v) && Object.keys(v).length === 1 && typeof v.file === 'string') {
    const file = path.resolve(r.file === 'command line' ? '.' : path.dirname(r.file), v.file);
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (e) {
      r.fail(`${where}.file`, `cannot read ${file} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
    }
    const items: unknown[] = [];
    const lines: number[] = [];
    text.split(/\r?\n/).forEach((line, n) => {
      const item = line.replace(/#.*$/, '').trim();
      if (item) {
        items.push(item);
        lines.push(n + 1);
      }
    });
    if (items.length === 0) r.fail(`${where}.file`, `${file} lists no ${what}`);
    return { items, at: (i) => `${where}.file (${file} line ${lines[i]})` };
  }
  return { items: list(r, v, where, what), at: (i) => `${where}[${i}]` };
}

function addressList(r: Reader, v: unknown, where: string): string[] {
  const seen = new Set<string>();
  const { items, at } = listOrFile(r, v, where, 'addresses');
  return items.flatMap((a, i) => {
    const problem = addressProblem(a);
    if (problem) r.fail(at(i), problem);
    const lower = (a as string).toLowerCase();
    if (seen.has(lower)) return [];
    seen.add(lower);
    return [lower];
  });
}

function hashOf(r: Reader, v: unknown, where: string, what: string): string {
  if (typeof v !== 'string' || !HASH.test(v)) r.fail(where, `not ${what} (0x + 64 hex digits): ${JSON.stringify(v)}`);
  return v.toLowerCase();
}

function blockList(r: Reader, v: unknown, where: string): ScopeValues[] {
  const blocks = new Set<number>();
  list(r, v, where, 'block numbers or "from-to" ranges').forEach((b, i) => {
    const at = `${where}[${i}]`;
    let from: number, to: number;
    if (typeof b === 'number') from = to = r.int(b, at, 0);
    else if (typeof b === 'string' && BLOCK_RANGE.test(b)) {
      const m = BLOCK_RANGE.exec(b)!;
      [from, to] = [Number(m[1]), Number(m[2])];
      if (!Number.isSafeInteger(to) || to < from) r.fail(at, `the range ${JSON.stringify(b)} must run from a lower to a higher block`);
    } else return r.fail(at, `must be a block number or a "from-to" range, got ${JSON.stringify(b)}`);
    if (blocks.size + (to - from + 1) > MAX_BLOCK_SCOPES) r.fail(where, `names more than ${MAX_BLOCK_SCOPES} blocks (one call each)`);
    for (let n = from; n <= to; n++) blocks.add(n);
  });
  return [...blocks].sort((a, b) => a - b).map((n) => ({ block: String(n) }));
}

/**
 * Event-log filters: `contracts` as addresses (sharing the spec's `topics`/`operand`) or objects with their own.
 * Topics are optional: an address alone (or `[]`, or null for topic 0) asks for all the contract's logs, which
 * the real service serves (the spec requires topic_0; a service that does too refuses such a window).
 */
function contractTopicScopes(r: Reader, spec: Obj, where: string): ScopeValues[] {
  const topicsOf = (t: unknown, at: string): ScopeValues => {
    if (!Array.isArray(t) || t.length > 4) r.fail(at, 'must list up to 4 topics: [topic0?, topic1?, topic2?, topic3?] (null for "any")');
    const out: ScopeValues = {};
    for (let i = 0; i < t.length; i++) if (t[i] !== null) out[`topic${i}`] = hashOf(r, t[i], `${at}[${i}]`, 'a topic');
    return out;
  };
  const options = (o: Obj, at: string): ScopeValues => {
    const out: ScopeValues = {};
    if (o.operand !== undefined) {
      if (o.operand !== 'and' && o.operand !== 'or') r.fail(`${at}.operand`, `must be "and" or "or", got ${JSON.stringify(o.operand)}`);
      out.operand = o.operand;
    }
    if (o.type !== undefined) {
      if (o.type !== 'single' && o.type !== 'combine') r.fail(`${at}.type`, `must be "single" or "combine", got ${JSON.stringify(o.type)}`);
      out.type = o.type;
    }
    return out;
  };
  const shared = spec.topics === undefined ? undefined : topicsOf(spec.topics, `${where}.topics`);
  const sharedOptions = options(spec, where);
  const seen = new Set<string>();
  return list(r, spec.contracts, `${where}.contracts`, 'contracts (addresses, or {"address", "topics"} objects)').flatMap((c, i) => {
    const at = `${where}.contracts[${i}]`;
    let scope: ScopeValues;
    if (typeof c === 'string') {
      scope = { contract: addressList(r, [c], at.replace(/\[\d+\]$/, ''))[0]!, ...shared, ...sharedOptions };
    } else if (isObj(c)) {
      r.keys(c, at, ['address', 'topics', 'operand', 'type']);
      const problem = addressProblem(c.address);
      if (problem) r.fail(`${at}.address`, problem);
      const topics = c.topics === undefined ? shared : topicsOf(c.topics, `${at}.topics`);
      scope = { contract: (c.address as string).toLowerCase(), ...topics, ...sharedOptions, ...options(c, at) };
    } else return r.fail(at, `must be an address or an object {"address", "topics"}, got ${JSON.stringify(c)}`);
    const key = JSON.stringify(Object.entries(scope).sort());
    if (seen.has(key)) return [];
    seen.add(key);
    return [scope];
  });
}

function chartScopes(r: Reader, v: unknown, where: string): ScopeValues[] {
  return list(r, v, where, 'charts ({"unit", "unit_count", "unit_multiplier"})').map((c, i) => {
    const at = `${where}[${i}]`;
    if (!isObj(c)) r.fail(at, 'must be an object {"unit": "hour", "unit_count": 24, "unit_multiplier": 1}');
    r.keys(c, at, ['unit', 'unit_count', 'unit_multiplier']);
    if (typeof c.unit !== 'string' || !CHART_UNITS.includes(c.unit))
      r.fail(`${at}.unit`, `must be one of ${CHART_UNITS.join(', ')}, got ${JSON.stringify(c.unit)}`);
    return {
      unit: c.unit,
      unit_count: String(r.int(c.unit_count, `${at}.unit_count`, 1)),
      unit_multiplier: String(c.unit_multiplier === undefined ? 1 : r.int(c.unit_multiplier, `${at}.unit_multiplier`, 1)),
    };
  });
}

/** The scopes of one kind a dataset spec gives; undefined when the spec says nothing for that kind. */
function scopesFor(r: Reader, kind: ScopeKind, spec: Obj, where: string): ScopeValues[] | undefined {
  const has = (key: string): boolean => spec[key] !== undefined;
  switch (kind) {
    case 'address':
      return has('addresses') ? addressList(r, spec.addresses, `${where}.addresses`).map((address) => ({ address })) : undefined;
    case 'address_batch': {
      if (!has('addresses')) return undefined;
      const all = addressList(r, spec.addresses, `${where}.addresses`);
      const batches: ScopeValues[] = [];
      for (let i = 0; i < all.length; i += BALANCE_BATCH) batches.push({ addresses: all.slice(i, i + BALANCE_BATCH).join(',') });
      return batches;
    }
    case 'transaction':
      if (!has('transactions')) return undefined;
      {
        const { items, at } = listOrFile(r, spec.transactions, `${where}.transactions`, 'transaction hashes');
        return [...new Set(items.map((h, i) => hashOf(r, h, at(i), 'a transaction hash')))].map((transaction) => ({ transaction }));
      }
    case 'contract':
      return has('contracts') ? addressList(r, spec.contracts, `${where}.contracts`).map((contract) => ({ contract })) : undefined;
    case 'contract_topics':
      return has('contracts') ? contractTopicScopes(r, spec, where) : undefined;
    case 'token':
      return has('tokens') ? addressList(r, spec.tokens, `${where}.tokens`).map((token) => ({ token })) : undefined;
    case 'token_holder': {
      if (!has('pairs')) return undefined;
      const seen = new Set<string>();
      return list(r, spec.pairs, `${where}.pairs`, '{"token", "holder"} pairs').flatMap((p, i) => {
        const at = `${where}.pairs[${i}]`;
        if (!isObj(p)) r.fail(at, 'must be an object {"token": "0x…", "holder": "0x…"}');
        r.keys(p, at, ['token', 'holder']);
        const token = addressList(r, [p.token], `${at}.token`)[0]!;
        const holder = addressList(r, [p.holder], `${at}.holder`)[0]!;
        if (seen.has(`${token}/${holder}`)) return [];
        seen.add(`${token}/${holder}`);
        return [{ token, holder }];
      });
    }
    case 'block':
      return has('blocks') ? blockList(r, spec.blocks, `${where}.blocks`) : undefined;
    case 'block_or_latest':
      return has('blocks') ? blockList(r, spec.blocks, `${where}.blocks`) : [{}];
    case 'pool':
      return has('pools') ? addressList(r, spec.pools, `${where}.pools`).map((pool) => ({ pool })) : undefined;
    case 'pid':
      if (!has('pids')) return undefined;
      return [...new Set(list(r, spec.pids, `${where}.pids`, 'pool ids').map((p, i) => r.int(p, `${where}.pids[${i}]`, 0)))].map((pid) => ({
        pid: String(pid),
      }));
    case 'chart':
      return has('charts') ? chartScopes(r, spec.charts, `${where}.charts`) : undefined;
    case 'none':
      return [{}];
  }
}

/** Reads one dataset's spec: its scopes by kind, the endpoints to fetch, and extra query parameters. */
export function parseDatasetSpec(r: Reader, def: DatasetDef, spec: unknown, where: string): DatasetJob {
  if (!isObj(spec)) r.fail(where, 'must be an object with the scope of the dataset');
  const kinds = scopeKindsOf(def);
  const hasInput = def.columns.some((c) => c.name === 'input');
  const allowed = [...new Set(kinds.flatMap((k) => SCOPE_KEYS[k]))];
  r.keys(spec, where, [...allowed, 'endpoints', ...(hasInput ? ['input'] : [])]);
  const query: Query = {};
  if (spec.input !== undefined) {
    if (typeof spec.input !== 'boolean') r.fail(`${where}.input`, 'must be true or false');
    query.input = spec.input;
  }
  const scopes: DatasetJob['scopes'] = {};
  for (const k of kinds) {
    const s = scopesFor(r, k, spec, where);
    if (s) scopes[k] = s;
  }
  let endpoints: string[];
  if (spec.endpoints !== undefined) {
    const ids = def.endpoints.map((e) => e.id);
    endpoints = [
      ...new Set(
        list(r, spec.endpoints, `${where}.endpoints`, 'endpoint ids').map((id, i) => {
          if (typeof id !== 'string' || !ids.includes(id))
            r.fail(`${where}.endpoints[${i}]`, `unknown endpoint ${JSON.stringify(id)}; this dataset has: ${ids.join(', ')}`);
          const e = def.endpoints.find((x) => x.id === id)!;
          if (!scopes[e.scope]) r.fail(`${where}.endpoints[${i}]`, `endpoint ${id} needs ${SCOPE_KEYS[e.scope].join(' or ')}`);
          return id;
        }),
      ),
    ];
  } else {
    endpoints = def.endpoints.filter((e) => !e.alternate && scopes[e.scope]).map((e) => e.id);
  }
  if (endpoints.length === 0) {
    const needs = [...new Set(kinds.flatMap((k) => SCOPE_KEYS[k].slice(0, 1)))];
    r.fail(where, `needs a scope: ${needs.map((n) => `"${n}"`).join(' or ')}`);
  }
  return { name: def.name, scopes, endpoints, query };
}

/** An object of integer settings, each within its bounds; absent keys keep their defaults. */
/** An object of int options (`retry`, `timeouts`): only the keys given, each checked against its declared bounds. */
function optionObject<K extends string>(r: Reader, v: unknown, where: string, group: Record<K, JobOption>): Partial<Record<K, number>> {
  if (v === undefined) return {};
  if (!isObj(v)) r.fail(where, `must be an object with any of: ${Object.keys(group).join(', ')}`);
  r.keys(v, where, Object.keys(group));
  const out: Partial<Record<K, number>> = {};
  for (const [k, o] of Object.entries(group) as [K, JobOption][]) if (v[k] !== undefined) out[k] = intOption(r, v[k], `${where}.${k}`, o);
  return out;
}

function cronOf(r: Reader, v: unknown): string {
  const expr = r.str(v, 'schedule');
  const problem = cronProblem(expr);
  if (problem) r.fail('schedule', `not a valid cron expression (${problem}), e.g. "15 2 * * *" for 02:15 UTC daily`);
  return expr;
}

/**
 * `at line L, column C: <what>` of a JSON.parse error: Node names a character offset at best ("at position
 * 812"), which no editor shows, and often quotes the whole file instead. The offset is the shortest prefix
 * that fails for a reason other than ending early (a prefix of valid JSON only ever "ends early").
 */
export function jsonErrorPlace(text: string, message: string): string {
  const fails = (n: number): boolean => {
    try {
      JSON.parse(text.slice(0, n));
      return false;
    } catch (e) {
      const msg = (e as Error).message;
      if (/end of JSON input/i.test(msg)) return n === text.length;
      const at = /at position (\d+)/.exec(msg);
      return !at || Number(at[1]) < n || n === text.length;
    }
  };
  let lo = 1;
  let hi = text.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (fails(mid)) hi = mid;
    else lo = mid + 1;
  }
  const at = /at position (\d+)/.exec(message);
  const early = /end of JSON input/i.test(message) || (at !== null && text.slice(Number(at[1])).trim() === '');
  if (early) lo = text.length + 1;
  const token = /^Unexpected token '([^']*)'/.exec(message) ?? /^Unexpected non-whitespace character/.exec(message);
  const what = early
    ? 'the file ends early (a missing } or ]?)'
    : token?.[1] !== undefined
      ? `unexpected ${JSON.stringify(token[1])}`
      : message.replace(/\s*(in JSON )?at position \d+.*$/s, '').slice(0, 120);
  const offset = Math.max(0, lo - 1);
  const before = text.slice(0, offset);
  const line = before.split('\n').length;
  const column = offset - before.lastIndexOf('\n');
  return `at line ${line}, column ${column}: ${what}`;
}

/**
 * The finality depth a job gets when it names none: its network's (JOB_DEFAULTS.finalityDepth) on a real
 * service; 0 on the embedded simulator, whose chain never reorganises nor lags unless a test tells it to.
 */
export function defaultFinalityDepth(target: 'api' | 'simulator', network: Network): number {
  return target === 'simulator' ? 0 : JOB_DEFAULTS.finalityDepth[network];
}

/** Validates a parsed job document. Environment supplies the API key and any base URL the job leaves out. */
/** What a job file may leave out, in one place (the job schema and README describe the same values). */
/** Defaults of a job's options (declared in job-options.ts, with their bounds and words). */
export const JOB_DEFAULTS = Object.freeze({
  name: 'job',
  network: TOP_OPTIONS.network.default as Network,
  target: TOP_OPTIONS.target.default,
  lake: TOP_OPTIONS.lake.default,
  fromBlock: RANGE_OPTIONS.fromBlock.default!,
  safetyMarginBlocks: RANGE_OPTIONS.safetyMarginBlocks.default!,
  /** range.finalityDepth per network of a real service: two epochs of an Ethereum-like chain (docs/api-assumptions.md). */
  finalityDepth: Object.freeze({ mainnet: 64, testnet: 64 } as Record<Network, number>),
  windowBlocks: DEFAULT_WINDOW_BLOCKS,
  commit: Object.freeze({ everyRows: COMMIT_OPTIONS.everyRows.default!, everySeconds: COMMIT_OPTIONS.everySeconds.default! }),
  concurrency: TOP_OPTIONS.concurrency.default!,
  strict: TOP_OPTIONS.strict.default,
  pageSize: TOP_OPTIONS.pageSize.default!,
  resultWindow: TOP_OPTIONS.resultWindow.default!,
});

/** An int option's value in the job (checked against its declared bounds), or its declared default. */
function intOption(r: Reader, v: unknown, where: string, o: JobOption): number | undefined {
  if (o.kind !== 'int') throw bugError(`${where} is not declared as an integer option`);
  return v === undefined ? o.default : r.int(v, where, o.min, o.max);
}

/**
 * The keys a job file may hold at `at` (`[]`: the top level; `['range']`: inside "range"), read from the
 * published JSON Schema (job-schema.ts), so the schema editors check against and the parser never disagree.
 */
let schemaProperties: Record<string, unknown> | undefined;
function schemaKeys(at: readonly string[]): string[] {
  schemaProperties ??= (jobSchema() as { properties: Record<string, unknown> }).properties;
  let props = schemaProperties;
  for (const k of at) props = (props[k] as { properties: Record<string, unknown> }).properties;
  return Object.keys(props);
}

/** The resolved job is read-only all the way down: a run derives changed copies (effectiveJob), never edits it. */
function deepFreeze<T>(v: T): T {
  if (v !== null && typeof v === 'object' && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const x of Object.values(v)) deepFreeze(x);
  }
  return v;
}

/**
 * A job without a `name` is named after its file (`jobs/nightly.json` → `nightly`): two such jobs of one lake are
 * two jobs, each resuming its own runs. Characters a name may not hold become `-`; a job from the command line
 * (`export`) is `job`.
 */
export function nameOfFile(file: string): string {
  if (file === 'command line') return JOB_DEFAULTS.name;
  const base = path
    .basename(file)
    .replace(/\.json$/i, '')
    .replace(/[^A-Za-z0-9_.-]+/g, '-')
    .replace(/^[^A-Za-z0-9]+|[^A-Za-z0-9]+$/g, '');
  return base === '' ? JOB_DEFAULTS.name : base;
}

/**
 * The job a document holds, resolved once and frozen all the way down. `env` supplies the API key and any base
 * URL the document leaves out; `overrides`, the command line's values over the document's.
 */
export function parseJob(doc: unknown, file: string, env: NodeJS.ProcessEnv, overrides: JobOverrides = {}): Job {
  return deepFreeze(readJob(doc, file, env, overrides));
}

/**
 * A job document read in named steps, in the order their problems are reported (the first one throws): the
 * keys, who the job is, where it reads from, where it writes, which blocks, when it commits, what it fetches, that
 * the sources cover what it fetches, then how (the scalar options of job-options.ts).
 */
function readJob(doc: unknown, file: string, env: NodeJS.ProcessEnv, overrides: JobOverrides): Job {
  const r: Reader = new Reader(file);
  if (!isObj(doc)) r.fail('', 'a job file must hold a JSON object');
  r.keys(doc, '', schemaKeys([]));
  const { name, network } = readIdentity(r, doc, file);
  const target = readTarget(r, doc, network, env);
  const dir = readLake(r, doc);
  const range = withRangeOverrides(readRange(r, doc, target.kind, network), overrides);
  const commit = readCommit(r, doc);
  const datasets = readDatasets(r, doc);
  checkFinanceSource(r, target, datasets);
  const apiKey = doc.apiKey !== undefined ? r.str(doc.apiKey, 'apiKey') : env.CHAINLAKE_API_KEY || undefined;
  const paths = pathOverrides(r, doc.paths);
  checkExplorerSource(r, target, datasets, network);
  const decode = doc.decode === undefined ? undefined : parseDecodeSpec(doc.decode, 'decode', (w, m) => r.fail(w, m), path.dirname(file));
  const source: JobSource = {
    network,
    target,
    apiKey,
    paths,
    concurrency: overrides.concurrency ?? intOption(r, doc.concurrency, 'concurrency', TOP_OPTIONS.concurrency)!,
    rps: overrides.rps ?? intOption(r, doc.rps, 'rps', TOP_OPTIONS.rps),
    burst: intOption(r, doc.burst, 'burst', TOP_OPTIONS.burst),
    retry: optionObject(r, doc.retry, 'retry', RETRY_OPTIONS),
    timeouts: optionObject(r, doc.timeouts, 'timeouts', TIMEOUT_OPTIONS),
    pageSize: intOption(r, doc.pageSize, 'pageSize', TOP_OPTIONS.pageSize)!,
    resultWindow: intOption(r, doc.resultWindow, 'resultWindow', TOP_OPTIONS.resultWindow)!,
    dailyRequestQuota: intOption(r, doc.dailyRequestQuota, 'dailyRequestQuota', TOP_OPTIONS.dailyRequestQuota),
  };
  const strict = doc.strict === undefined ? TOP_OPTIONS.strict.default : r.bool(doc.strict, 'strict');
  return {
    name,
    file,
    what: { network, datasets, range, ...(decode === undefined ? {} : { decode }) },
    source,
    lake: { dir: overrides.lake ?? dir, commit, strict: overrides.strict ?? strict },
    schedule: doc.schedule === undefined ? undefined : cronOf(r, doc.schedule),
  };
}

/** The range with the command line's `--window-blocks` (fixed chunks, as the job's own) and `--finality-depth`. */
function withRangeOverrides(range: JobRange, o: JobOverrides): JobRange {
  return {
    ...range,
    ...(o.finalityDepth === undefined ? {} : { finalityDepth: o.finalityDepth }),
    ...(o.windowBlocks === undefined ? {} : { windowBlocks: o.windowBlocks, fixedChunks: true }),
  };
}

/** Who the job is: its name (or its file's) and its network. */
function readIdentity(r: Reader, doc: Obj, file: string): { name: string; network: Network } {
  const name = doc.name === undefined ? nameOfFile(file) : r.str(doc.name, 'name');
  if (!NAME.test(name)) r.fail('name', `may hold letters, digits, '_', '-' and '.', got ${JSON.stringify(name)}`);
  const network = (doc.network ?? JOB_DEFAULTS.network) as Network;
  if (!NETWORKS.includes(network)) r.fail('network', `must be one of ${NETWORKS.join(', ')}, got ${JSON.stringify(doc.network)}`);
  return { name, network };
}

/** Where the job reads from: the embedded simulator, or the APIs' base URLs (the job's, else the environment's). */
function readTarget(r: Reader, doc: Obj, network: Network, env: NodeJS.ProcessEnv): JobSource['target'] {
  const targetKind = doc.target ?? JOB_DEFAULTS.target;
  if (targetKind === 'simulator') {
    const sim = doc.simulator === undefined ? {} : doc.simulator;
    if (!isObj(sim)) r.fail('simulator', 'must be an object');
    r.keys(sim, 'simulator', schemaKeys(['simulator']));
    if (sim.dialect !== undefined && sim.dialect !== 'spec' && sim.dialect !== 'real')
      r.fail('simulator.dialect', `must be spec or real, got ${JSON.stringify(sim.dialect)}`);
    if (sim.chain !== undefined && sim.chain !== 'demo' && sim.chain !== 'sparse')
      r.fail('simulator.chain', `must be demo or sparse, got ${JSON.stringify(sim.chain)}`);
    const scale = sim.scale;
    if (scale !== undefined && scale !== 'small' && scale !== 'medium' && scale !== 'large')
      r.fail('simulator.scale', `must be small, medium or large, got ${JSON.stringify(scale)}`);
    return {
      kind: 'simulator',
      seed: sim.seed === undefined ? undefined : r.int(sim.seed, 'simulator.seed', 0, 2 ** 32 - 1),
      scale,
      chain: sim.chain as SimulatorTarget['chain'],
      ...(sim.dialect === undefined ? {} : { dialect: sim.dialect }),
    };
  }
  if (targetKind !== 'api') r.fail('target', `must be "api" or "simulator", got ${JSON.stringify(targetKind)}`);
  const ep = doc.endpoints === undefined ? {} : doc.endpoints;
  if (!isObj(ep)) r.fail('endpoints', 'must be an object');
  r.keys(ep, 'endpoints', schemaKeys(['endpoints']));
  const url = (key: keyof typeof ENDPOINT_ENV): string | undefined => {
    const v = ep[key] ?? env[ENDPOINT_ENV[key]];
    if (v === undefined || v === '') return undefined;
    if (typeof v !== 'string' || !/^https?:\/\/\S+$/.test(v)) r.fail(`endpoints.${key}`, `must be an http(s) URL, got ${JSON.stringify(v)}`);
    return v;
  };
  // Checked once the datasets are known (checkExplorerSource): a job of finance datasets alone needs no explorer.
  const explorer = url(network);
  return { kind: 'api', explorer, explorerAlt: network === 'testnet' ? url('testnetAlt') : undefined, finance: url('finance') };
}

/** Where the job writes: its lake folder. */
function readLake(r: Reader, doc: Obj): string {
  const lake = doc.lake === undefined ? JOB_DEFAULTS.lake : r.str(doc.lake, 'lake');
  if (lake.trim() === '') r.fail('lake', 'is empty: name the lake folder (an empty path would write the lake into the working directory)');
  return lake;
}

/** Which blocks the block-ranged datasets cover, and how they are cut into windows. */
function readRange(r: Reader, doc: Obj, target: JobSource['target']['kind'], network: Network): JobRange {
  const rangeDoc = doc.range ?? {};
  if (!isObj(rangeDoc)) r.fail('range', 'must be an object like {"fromBlock": 0, "toBlock": "head"} or {"incremental": true, "fromBlock": 0}');
  r.keys(rangeDoc, 'range', schemaKeys(['range']));
  const fromBlock = intOption(r, rangeDoc.fromBlock, 'range.fromBlock', RANGE_OPTIONS.fromBlock)!;
  const toBlock =
    rangeDoc.toBlock === undefined || rangeDoc.toBlock === 'head' ? 'head' : intOption(r, rangeDoc.toBlock, 'range.toBlock', RANGE_OPTIONS.toBlock)!;
  if (toBlock !== 'head' && toBlock < fromBlock) r.fail('range', `toBlock ${toBlock} is below fromBlock ${fromBlock}`);
  const incremental = rangeDoc.incremental === undefined ? RANGE_OPTIONS.incremental.default : r.bool(rangeDoc.incremental, 'range.incremental');
  if (incremental && toBlock !== 'head') r.fail('range', 'an incremental range runs up to the head: leave toBlock out (or "head")');
  const head = intOption(r, rangeDoc.head, 'range.head', RANGE_OPTIONS.head);
  const headHint = intOption(r, rangeDoc.headHint, 'range.headHint', RANGE_OPTIONS.headHint);
  return {
    fromBlock,
    toBlock,
    incremental,
    safetyMarginBlocks: intOption(r, rangeDoc.safetyMarginBlocks, 'range.safetyMarginBlocks', RANGE_OPTIONS.safetyMarginBlocks)!,
    finalityDepth: intOption(r, rangeDoc.finalityDepth, 'range.finalityDepth', RANGE_OPTIONS.finalityDepth) ?? defaultFinalityDepth(target, network),
    // Without windowBlocks a scope's range is asked at once and cut by count; the chunk size still bounds a plan.
    windowBlocks: intOption(r, rangeDoc.windowBlocks, 'range.windowBlocks', RANGE_OPTIONS.windowBlocks) ?? DEFAULT_WINDOW_BLOCKS,
    ...(head === undefined ? {} : { head }),
    ...(headHint === undefined ? {} : { headHint }),
    ...(rangeDoc.windowBlocks !== undefined ? { fixedChunks: true } : {}),
  };
}

/** When a run commits what it has fetched. */
function readCommit(r: Reader, doc: Obj): JobLake['commit'] {
  const commitDoc = doc.commit ?? {};
  if (!isObj(commitDoc)) r.fail('commit', 'must be an object like {"everyRows": 500000, "everySeconds": 60}');
  r.keys(commitDoc, 'commit', schemaKeys(['commit']));
  return {
    everyRows: intOption(r, commitDoc.everyRows, 'commit.everyRows', COMMIT_OPTIONS.everyRows)!,
    everySeconds: intOption(r, commitDoc.everySeconds, 'commit.everySeconds', COMMIT_OPTIONS.everySeconds)!,
  };
}

/** What the job fetches: each named dataset with its scopes. */
function readDatasets(r: Reader, doc: Obj): DatasetJob[] {
  const datasetsDoc = doc.datasets;
  if (!isObj(datasetsDoc) || Object.keys(datasetsDoc).length === 0)
    r.fail('datasets', 'must be an object naming at least one dataset, e.g. {"transactions": {"addresses": ["0x…"]}}');
  return Object.entries(datasetsDoc).map(([dsName, spec]) => {
    const where = `datasets.${dsName}`;
    const def = DATASETS[dsName];
    if (!def) r.fail(where, `unknown dataset${didYouMean(dsName, datasetNames())}; known datasets: ${datasetNames().join(', ')}`);
    return parseDatasetSpec(r, def, spec, where);
  });
}

const readsApi = (datasets: readonly DatasetJob[], api: 'explorer' | 'finance'): DatasetJob | undefined =>
  datasets.find((d) => DATASETS[d.name]!.endpoints.some((e) => d.endpoints.includes(e.id) && e.api === api));

/** A job of the real APIs that fetches a finance dataset names the finance API. */
function checkFinanceSource(r: Reader, target: JobSource['target'], datasets: readonly DatasetJob[]): void {
  if (target.kind !== 'api' || target.finance) return;
  const financeDs = readsApi(datasets, 'finance');
  if (financeDs)
    r.fail('endpoints.finance', `no finance base URL, and ${financeDs.name} reads the finance API: set it in the job or in ${ENDPOINT_ENV.finance}`);
}

/** A job of the real APIs that fetches an explorer dataset names its network's explorer. */
function checkExplorerSource(r: Reader, target: JobSource['target'], datasets: readonly DatasetJob[], network: Network): void {
  if (target.kind === 'api' && !target.explorer && readsApi(datasets, 'explorer'))
    r.fail(`endpoints.${network}`, `no ${network} base URL: set it in the job or in ${ENDPOINT_ENV[network]}`);
}

/** Every endpoint of both APIs by id (ids are unique across datasets), with its dataset. */
export function endpointsById(): Map<string, { dataset: string; endpoint: DatasetDef['endpoints'][number] }> {
  const out = new Map<string, { dataset: string; endpoint: DatasetDef['endpoints'][number] }>();
  for (const name of datasetNames()) for (const e of DATASETS[name]!.endpoints) out.set(e.id, { dataset: name, endpoint: e });
  return out;
}

const placeholdersOf = (path: string): string[] => [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!);

/**
 * The job's `paths`: endpoint id -> a path below the API's base URL. Checked now, so that a typo fails the job
 * before any request: the id must be an endpoint's, the path must start with '/', hold no query, fragment or
 * space, and use only placeholders its endpoint's default path has (they are filled from the scope).
 */
function pathOverrides(r: Reader, v: unknown): Record<string, string> {
  if (v === undefined) return {};
  if (!isObj(v)) r.fail('paths', 'must be an object like {"total_chart": "/usdx/total_chart"} (endpoint id -> path)');
  const known = endpointsById();
  const out: Record<string, string> = {};
  for (const [id, path] of Object.entries(v)) {
    const at = `paths.${id}`;
    const e = known.get(id);
    if (!e) r.fail(at, `unknown endpoint id '${id}'; valid ids (chainlake describe --endpoints): ${[...known.keys()].sort().join(', ')}`);
    if (typeof path !== 'string' || !path.startsWith('/') || /[\s?#]/.test(path) || path.includes('//'))
      r.fail(at, `must be a path starting with '/' (no query, fragment, space or '//'), got ${JSON.stringify(path)}`);
    const allowed = placeholdersOf(e.endpoint.path);
    const bad = placeholdersOf(path).filter((p) => !allowed.includes(p));
    if (bad.length)
      r.fail(at, `uses {${bad.join('}, {')}}, which the scope of ${id} does not give; it may use ${allowed.length ? `{${allowed.join('}, {')}}` : 'none'}`);
    out[id] = path;
  }
  return out;
}

export async function loadJobFile(file: string, env: NodeJS.ProcessEnv, overrides?: JobOverrides): Promise<Job> {
  return (await loadJobDocument(file, env, overrides)).job;
}

/**
 * The job and the document it was parsed from (the distributed mode stores the document for its workers).
 * `overrides` may depend on the document (the lake rule asks whether the file names its lake).
 */
export async function loadJobDocument(
  file: string,
  env: NodeJS.ProcessEnv,
  overrides: JobOverrides | ((doc: unknown) => JobOverrides) = {},
): Promise<{ job: Job; doc: unknown }> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    throw new JobError(file, '', `cannot read the job file (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw new JobError(file, '', `not valid JSON ${jsonErrorPlace(text, (e as Error).message)}`);
  }
  return { job: parseJob(doc, file, env, typeof overrides === 'function' ? overrides(doc) : overrides), doc };
}
