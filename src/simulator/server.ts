// One node:http server for both APIs: /mainnet, /testnet, /testnet-alt (explorer) and /finance.

import http from 'node:http';
import { AddressInfo } from 'node:net';
import { Chain, Network } from './chain.js';
import { ExplorerState, ROUTES, matchRoute } from './explorer.js';
import { FaultKind, FaultOptions, FaultPlan, RateLimitOptions, TokenBuckets } from './faults.js';
import { financeFailure, handleFinance } from './finance.js';
import { ApiError } from './params.js';
import { hash2 } from './rng.js';
import { REAL_LATEST_REFUSAL, REAL_UNVERIFIED_BODY, realFinanceSegments, type Dialect } from './dialect.js';
import { renderBlock } from './render.js';
import { withoutRangeFilter } from './range-filter.js';
import { isoSeconds } from './hex.js';
import type { SparseChain } from './sparse.js';
import { indexedHead } from './finality.js';

export interface ServerConfig {
  apiKey: string;
  host: string;
  port: number;
  resultWindow: number;
  latencyMs?: { min: number; max: number } | number;
  faults?: FaultOptions;
  rateLimit?: RateLimitOptions;
  /** `real`: behave as the real services do where they differ from the spec (src/simulator/dialect.ts). */
  dialect?: Dialect;
  /** With the real dialect: listings ignore their block range filter (src/simulator/range-filter.ts). */
  ignoresRangeFilter?: boolean;
  /** `chain: 'sparse'`: the tall chain answers the head, blocks and its own addresses' ERC-20 transfers. */
  sparse?: Record<Network, SparseChain>;
  /** A network's head without making its chain (the testnet chain is made on first use: see index.ts). */
  headOf?: (network: Network) => number;
  /** Listings answer only the rows up to this many blocks below the head (finality.ts). */
  indexLagBlocks?: number;
}

export interface Stats {
  requests: number;
  rowsServed: number;
  faults: Record<string, number>;
  rateLimited: number;
  byRoute: Record<string, number>;
  head: Record<'mainnet' | 'testnet', number>;
}

interface Reply {
  status: number;
  body: string | Buffer;
  rows: number;
  headers?: Record<string, string>;
  contentType?: string;
  /** Gives the body's buffer back to its writer once the socket has taken the bytes (see ByteOut.takeOwned). */
  release?: () => void;
}

type RouteMatch = ReturnType<typeof matchRoute>[number];

/**
 * The explorer route of `method` and `segs` on host `base`, and the network it reads; or the 404 / 405 reply
 * (testnet-alt serves one route only, which testnet does not).
 */
function routeOf(base: 'mainnet' | 'testnet' | 'testnet-alt', method: string, segs: string[]): { hit: RouteMatch; network: Network } | Reply {
  const path = '/' + [base, ...segs].join('/');
  if (segs[0] !== 'v1') return { status: 404, body: explorerError(404, `Unknown path ${method} ${path}: explorer paths start with /v1`), rows: 0 };
  const matches = matchRoute(ROUTES, segs.slice(1));
  const network: Network = base === 'mainnet' ? 'mainnet' : 'testnet';
  const hit = matches.find((m) => m.route.method === method);
  if (!hit) {
    if (matches.length > 0)
      return {
        status: 405,
        body: explorerError(405, `Method ${method} not allowed on ${path}; use ${matches[0]!.route.method}`),
        rows: 0,
        headers: { allow: matches.map((m) => m.route.method).join(', ') },
      };
    return { status: 404, body: explorerError(404, `Unknown path ${method} ${path}`), rows: 0 };
  }
  const isTxInternal = hit.route.name === 'transactions/internal-transactions';
  if (base === 'testnet-alt' && !isTxInternal)
    return {
      status: 404,
      body: explorerError(404, `Unknown path ${method} ${path}: the testnet-alt host serves only /v1/transactions/{transaction_hash}/internal-transactions`),
      rows: 0,
    };
  if (base === 'testnet' && isTxInternal)
    return {
      status: 404,
      body: explorerError(404, `Unknown path ${method} ${path}: on testnet, internal transactions by transaction hash are served by the testnet-alt host`),
      rows: 0,
    };
  return { hit, network };
}

/** A POST's JSON body (undefined for a GET), or the 415 / 400 reply to a body that is not JSON. */
function jsonBody(method: string, req: http.IncomingMessage, rawBody: string): { body: unknown } | Reply {
  if (method !== 'POST') return { body: undefined };
  const ct = String(req.headers['content-type'] ?? '');
  if (!ct.toLowerCase().startsWith('application/json'))
    return { status: 415, body: explorerError(415, `Content-Type must be application/json, got '${ct.slice(0, 60)}'`), rows: 0 };
  try {
    return { body: JSON.parse(rawBody) as unknown };
  } catch {
    return { status: 400, body: explorerError(400, 'Request body is not valid JSON'), rows: 0 };
  }
}

const JSON_TYPE = 'application/json; charset=utf-8';
const MAX_BODY = 1 << 20;
const HTML_ERROR =
  '<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>\n';

const OK_PREFIX = '{"status":"200","message":"OK","results":';
const OK_PREFIX_BYTES = Buffer.from(OK_PREFIX, 'latin1');
const CLOSE_BYTES = Buffer.from('}', 'latin1');

export function explorerError(status: number, message: string): string {
  return JSON.stringify({ status: String(status), message, results: null });
}

export class SimServer {
  readonly server: http.Server;
  private faultPlan: FaultPlan | undefined;
  private buckets: TokenBuckets | undefined;
  private latency: ServerConfig['latencyMs'];
  private latencyN = 0;
  private timers = new Set<NodeJS.Timeout>();
  private stats!: Stats;
  readonly state: Record<Network, ExplorerState> = { mainnet: { verified: new Map() }, testnet: { verified: new Map() } };

  constructor(
    readonly chains: Record<Network, Chain>,
    readonly cfg: ServerConfig,
  ) {
    this.setFaults(cfg.faults);
    this.setRateLimit(cfg.rateLimit);
    this.setLatency(cfg.latencyMs);
    this.resetStats();
    this.server = http.createServer({ keepAliveTimeout: 30_000 }, (req, res) => {
      this.handle(req, res).catch((err: unknown) => {
        if (!res.headersSent && !res.destroyed) this.send(res, { status: 500, body: explorerError(500, 'Internal simulator error: ' + String(err)), rows: 0 });
      });
    });
  }

  async listen(): Promise<number> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.cfg.port, this.cfg.host, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    return (this.server.address() as AddressInfo).port;
  }

  async close(): Promise<void> {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  setFaults(f: FaultOptions | undefined): void {
    this.faultPlan = f && f.rate > 0 ? new FaultPlan(f) : undefined;
  }
  setRateLimit(r: RateLimitOptions | undefined): void {
    this.buckets = r ? new TokenBuckets(r) : undefined;
  }
  setLatency(l: ServerConfig['latencyMs']): void {
    if (typeof l === 'number' && !(l >= 0)) throw new RangeError(`latencyMs must be >= 0, got ${l}`);
    if (typeof l === 'object' && !(l.min >= 0 && l.max >= l.min)) throw new RangeError(`latencyMs needs 0 <= min <= max`);
    this.latency = l;
  }

  getStats(): Stats {
    return {
      ...this.stats,
      faults: { ...this.stats.faults },
      byRoute: { ...this.stats.byRoute },
      head: { mainnet: this.headOf('mainnet'), testnet: this.headOf('testnet') },
    };
  }
  private headOf(network: Network): number {
    return this.cfg.headOf?.(network) ?? this.chains[network].head;
  }
  resetStats(): void {
    this.stats = { requests: 0, rowsServed: 0, faults: {}, rateLimited: 0, byRoute: {}, head: { mainnet: 0, testnet: 0 } };
  }

  private delay(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.timers.delete(t);
        resolve();
      }, ms);
      this.timers.add(t);
    });
  }

  private latencyFor(): number {
    const l = this.latency;
    if (l === undefined) return 0;
    if (typeof l === 'number') return l;
    const n = this.latencyN++;
    // Skewed towards the minimum with a long tail, like real request latency.
    const u = (hash2(0x1a7e, n) % 10_000) / 10_000;
    return Math.round(l.min + (l.max - l.min) * u * u);
  }

  private send(res: http.ServerResponse, r: Reply): void {
    if (res.destroyed) return;
    const buf = typeof r.body === 'string' ? Buffer.from(r.body, 'utf8') : r.body;
    res.writeHead(r.status, { 'content-type': r.contentType ?? JSON_TYPE, 'content-length': buf.length, ...(r.headers ?? {}) });
    // 'finish' (end's callback) comes after the last write was handed to the kernel, so the buffer can be
    // reused; a connection that fails first never calls it and the buffer is left to the GC.
    if (r.release) res.end(buf, r.release);
    else res.end(buf);
  }

  private async readBody(req: http.IncomingMessage): Promise<string> {
    const chunks: Buffer[] = [];
    let n = 0;
    for await (const c of req) {
      n += (c as Buffer).length;
      if (n > MAX_BODY) throw new ApiError(413, `Request body exceeds ${MAX_BODY} bytes`);
      chunks.push(c as Buffer);
    }
    return Buffer.concat(chunks).toString('utf8');
  }

  async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://sim.local');
    const method = req.method ?? 'GET';
    if (url.pathname === '/_sim/stats') {
      this.send(res, { status: 200, body: JSON.stringify(this.getStats()), rows: 0 });
      return;
    }
    let segs: string[];
    try {
      segs = url.pathname
        .split('/')
        .filter((s) => s.length > 0)
        .map((s) => decodeURIComponent(s));
    } catch {
      this.send(res, { status: 400, body: explorerError(400, `Malformed percent-encoding in path ${url.pathname.slice(0, 120)}`), rows: 0 });
      return;
    }
    const base = segs[0] ?? '';
    this.stats.requests++;
    let rawBody = '';
    if (method === 'POST' || method === 'PUT') {
      try {
        rawBody = await this.readBody(req);
      } catch (e) {
        const status = e instanceof ApiError ? e.status : 400;
        this.send(res, { status, body: explorerError(status, e instanceof Error ? e.message : String(e)), rows: 0 });
        return;
      }
    }
    const lat = this.latencyFor();
    if (lat > 0) await this.delay(lat);
    if (res.destroyed) return;

    const fault = this.faultPlan?.next() ?? null;
    if (fault) {
      this.stats.faults[fault] = (this.stats.faults[fault] ?? 0) + 1;
      if (this.applyFault(fault, req, res, base === 'finance')) return;
    }
    let reply: Reply;
    if (base === 'finance') reply = this.finance(method, segs.slice(1), url.searchParams, req);
    else if (base === 'mainnet' || base === 'testnet' || base === 'testnet-alt')
      reply = this.explorer(base, method, segs.slice(1), url.searchParams, req, rawBody);
    else
      reply = {
        status: 404,
        body: explorerError(404, `Unknown path ${method} ${url.pathname}: base paths are /mainnet, /testnet, /testnet-alt and /finance`),
        rows: 0,
      };

    if (fault === 'truncated') {
      const buf = typeof reply.body === 'string' ? Buffer.from(reply.body, 'utf8') : reply.body;
      const cut = buf.subarray(0, Math.max(1, Math.floor(buf.length / 2)));
      if (res.destroyed) return;
      res.writeHead(reply.status, { 'content-type': reply.contentType ?? JSON_TYPE, 'content-length': cut.length });
      res.end(cut);
      return;
    }
    if (reply.status === 200) this.stats.rowsServed += reply.rows;
    this.send(res, reply);
  }

  /** Returns true when the fault fully handled the request. `truncated` is applied after the handler runs. */
  private applyFault(kind: FaultKind, req: http.IncomingMessage, res: http.ServerResponse, finance: boolean): boolean {
    const plan = this.faultPlan!;
    const env = (status: number, message: string): string =>
      finance ? JSON.stringify({ type: 'failure', message, data: null }) : explorerError(status, message);
    switch (kind) {
      case '429':
        this.send(res, { status: 429, body: env(429, 'Too many requests'), rows: 0, headers: { 'retry-after': String(plan.retryAfterSeconds) } });
        return true;
      case 'throttle':
        this.send(res, { status: 200, body: env(429, 'Too many requests'), rows: 0 });
        return true;
      case '500':
        this.send(res, { status: 500, body: env(500, 'Internal server error'), rows: 0 });
        return true;
      case '502':
        this.send(res, { status: 502, body: env(502, 'Bad gateway'), rows: 0 });
        return true;
      case '503':
        this.send(res, { status: 503, body: env(503, 'Service temporarily unavailable'), rows: 0, headers: { 'retry-after': String(plan.retryAfterSeconds) } });
        return true;
      case 'reset':
        req.socket.destroy();
        return true;
      case 'stall': {
        const t = setTimeout(() => {
          this.timers.delete(t);
          req.socket.destroy();
        }, plan.stallMs);
        this.timers.add(t);
        req.socket.once('close', () => {
          clearTimeout(t);
          this.timers.delete(t);
        });
        return true;
      }
      case 'non-json':
        this.send(res, { status: 200, body: HTML_ERROR, rows: 0, contentType: 'text/html; charset=utf-8' });
        return true;
      case 'truncated':
        return false;
    }
  }

  private rateLimited(key: string): Reply | null {
    if (!this.buckets) return null;
    const wait = this.buckets.take(key, performance.now());
    if (wait === 0) return null;
    this.stats.rateLimited++;
    return { status: 429, body: '', rows: 0, headers: { 'retry-after': String(wait) } };
  }

  private countRoute(name: string): void {
    this.stats.byRoute[name] = (this.stats.byRoute[name] ?? 0) + 1;
  }

  private explorer(
    base: 'mainnet' | 'testnet' | 'testnet-alt',
    method: string,
    segs: string[],
    query: URLSearchParams,
    req: http.IncomingMessage,
    rawBody: string,
  ): Reply {
    const refused = this.refusedKey(req);
    if (refused) return refused;
    const routed = routeOf(base, method, segs);
    if ('status' in routed) return routed;
    const { hit, network } = routed;
    this.countRoute(base + '/' + hit.route.name);
    const parsed = jsonBody(method, req, rawBody);
    if ('status' in parsed) return parsed;
    const chain = this.chains[network];
    const real = this.cfg.dialect === 'real';
    if (real && hit.route.name === 'blocks' && hit.params[0]!.toLowerCase() === 'latest') {
      return { status: REAL_LATEST_REFUSAL.status, body: explorerError(REAL_LATEST_REFUSAL.status, REAL_LATEST_REFUSAL.message), rows: 0 };
    }
    const tall = this.cfg.sparse?.[network];
    if (tall) {
      try {
        const r = this.sparseReply(tall, hit.route.name, hit.params, query, chain);
        if (r) return r;
      } catch (e) {
        if (e instanceof ApiError) return { status: e.status, body: explorerError(e.status, e.message), rows: 0, headers: e.headers };
        throw e;
      }
    }
    return this.handled(hit, network, query, parsed.body);
  }

  /** A missing or wrong api-key, or one over its rate: the reply that refuses the request (null: none). */
  private refusedKey(req: http.IncomingMessage): Reply | null {
    const key = req.headers['api-key'];
    if (key === undefined || key === '') return { status: 401, body: explorerError(401, 'Missing api-key header'), rows: 0 };
    if (key !== this.cfg.apiKey) return { status: 403, body: explorerError(403, 'Invalid api-key'), rows: 0 };
    const limited = this.rateLimited('explorer:' + key);
    if (limited) return { ...limited, body: explorerError(429, `Rate limit exceeded: retry after ${limited.headers!['retry-after']} s`) };
    return null;
  }

  /** The route's handler on the demo chain, its results in the envelope (or its ApiError as the error reply). */
  private handled(hit: RouteMatch, network: Network, query: URLSearchParams, body: unknown): Reply {
    const chain = this.chains[network];
    const real = this.cfg.dialect === 'real';
    try {
      const r = hit.route.handler({
        chain,
        head: chain.head,
        query: this.cfg.ignoresRangeFilter ? withoutRangeFilter(query) : query,
        params: hit.params,
        body,
        resultWindow: this.cfg.resultWindow,
        state: this.state[network],
        dialect: this.cfg.dialect ?? 'spec',
        indexed: indexedHead(chain.head, this.cfg.indexLagBlocks),
      });
      const okBody = r.enveloped
        ? r.results
        : r.message !== undefined
          ? `{"status":"200","message":${JSON.stringify(r.message)},"results":${r.results.toString()}}`
          : typeof r.results === 'string'
            ? OK_PREFIX + r.results + '}'
            : Buffer.concat([OK_PREFIX_BYTES, r.results, CLOSE_BYTES]);
      return { status: 200, body: okBody, rows: r.rows, release: r.enveloped ? r.release : undefined };
    } catch (e) {
      if (e instanceof ApiError) {
        if (real && e.status === 404 && (hit.route.name === 'contracts/abi' || hit.route.name === 'contracts/code') && /not verified/.test(e.message)) {
          return { status: 200, body: REAL_UNVERIFIED_BODY, rows: 0 };
        }
        return { status: e.status, body: explorerError(e.status, e.message), rows: 0, headers: e.headers };
      }
      throw e;
    }
  }

  /** What the tall chain answers itself (undefined: the demo chain's handler answers). */
  private sparseReply(tall: SparseChain, route: string, params: string[], query: URLSearchParams, chain: Chain): Reply | undefined {
    if (route === 'accounts/token-transfer/erc20' && tall.scope(params[0]!)) {
      const { body, rows } = tall.transfersPage(params[0]!, query, this.cfg.resultWindow);
      return { status: 200, body: OK_PREFIX + body + '}', rows };
    }
    if (route === 'blocks') {
      const raw = params[0]!;
      const b = raw.toLowerCase() === 'latest' ? tall.head : /^[0-9]{1,15}$/.test(raw) ? Number(raw) : NaN;
      if (Number.isNaN(b)) throw new ApiError(400, `Invalid block_number '${raw.slice(0, 80)}': expected a non-negative integer or 'latest'`);
      if (b > tall.head) throw new ApiError(404, `Block ${b} not found: the latest block is ${tall.head}`);
      // The demo chain's block fields, renumbered: the tall chain's blocks hold none of its transactions.
      const entry = JSON.parse(renderBlock(chain, b % (chain.head + 1))) as Record<string, unknown>;
      Object.assign(entry, { block_number: String(b), timestamp: isoSeconds(tall.blockSeconds(b)) });
      return { status: 200, body: OK_PREFIX + JSON.stringify({ data: entry }) + '}', rows: 1 };
    }
    return undefined;
  }

  private finance(method: string, segs: string[], query: URLSearchParams, req: http.IncomingMessage): Reply {
    const accept = String(req.headers['accept'] ?? '*/*').toLowerCase();
    if (!/(application\/json|application\/\*|\*\/\*)/.test(accept)) {
      return {
        status: 406,
        body: JSON.stringify({
          type: 'failure',
          message: `Not acceptable: this API only produces application/json (accept was '${accept.slice(0, 60)}')`,
          data: null,
        }),
        rows: 0,
      };
    }
    const limited = this.rateLimited('finance:' + (req.socket.remoteAddress ?? ''));
    if (limited)
      return {
        ...limited,
        body: JSON.stringify({ type: 'failure', message: `Rate limit exceeded: retry after ${limited.headers!['retry-after']} s`, data: null }),
      };
    let r;
    const route = this.cfg.dialect === 'real' ? realFinanceSegments(segs) : segs;
    try {
      if (route === 'gone') throw new ApiError(404, `Unknown path ${method} /${segs.join('/')}`);
      r = handleFinance(this.chains.mainnet, method, route, query);
    } catch (e) {
      if (e instanceof ApiError) r = financeFailure(e.status, e.message);
      else throw e;
    }
    this.countRoute('finance/' + r.route);
    return { status: r.status, body: r.body, rows: r.rows };
  }
}
