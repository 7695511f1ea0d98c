import pLimit, { type LimitFunction } from 'p-limit';
import { Pool } from 'undici';
import type { Accounting } from './accounting.js';
import { systemClock, type Clock } from './clock.js';
import { ApiError, redactUrl, type ApiErrorDetails, type FailureKind, type FailureReason } from './errors.js';
import { QuotaReachedError, type QuotaGate } from './quota.js';
import { RateLimiter } from './rate-limiter.js';
import { bodySha256, describeCall, type RequestRecord } from './request-log.js';
import { readBody } from './body-pool.js';
import { scanList, type ListScan, type ScannedList } from './scan.js';

export interface RetryPolicy {
  /** Attempts per call, the first one included. */
  maxAttempts: number;
  /** First backoff cap; also the least wait after a `Retry-After`. */
  baseDelayMs: number;
  /** Cap of one backoff (a longer `Retry-After` is still honoured). */
  maxDelayMs: number;
  /** Give up once the waits of one call would add up to more than this. */
  maxTotalDelayMs: number;
}

export interface Timeouts {
  /** TCP (and TLS) connection set-up. */
  connectMs: number;
  /** From sending the request to the end of the response headers: a stalled server is cut off here. */
  headersMs: number;
  /** Longest silence between two chunks of the body. */
  bodyMs: number;
  /** Whole attempt, headers and body: a server trickling bytes cannot hold a request forever. */
  totalMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { maxAttempts: 10, baseDelayMs: 250, maxDelayMs: 30_000, maxTotalDelayMs: 300_000 };
export const DEFAULT_TIMEOUTS: Timeouts = { connectMs: 10_000, headersMs: 30_000, bodyMs: 30_000, totalMs: 120_000 };

/** One request sent (every attempt), for tracing and for tests that check the pace on the wire. */
export interface AttemptEvent {
  endpoint: string;
  /** Redacted. */
  url: string;
  attempt: number;
  /** When the rate limiter let it go (clock time). */
  at: number;
}

export interface RetryEvent {
  endpoint: string;
  /** What failed, e.g. `HTTP 503` or `network (ECONNREFUSED)`. */
  reason: string;
  /** The attempt about to be made, and the most there will be. */
  attempt: number;
  maxAttempts: number;
  delayMs: number;
}

export interface TransportOptions {
  /** Requests in flight at once, across every window of the run. */
  concurrency: number;
  /** Requests per second across the run; undefined means unbounded until the server throttles (then learned). */
  rps?: number;
  /** Requests allowed back to back after idling (see RateLimiter). */
  burst?: number;
  retry?: Partial<RetryPolicy>;
  timeouts?: Partial<Timeouts>;
  clock?: Clock;
  random?: () => number;
  onAttempt?: (e: AttemptEvent) => void;
  /** Told before each wait for a retry, so a person sees why nothing arrives (an unreachable API retries for minutes). */
  onRetry?: (e: RetryEvent) => void;
  /**
   * false: never scan a listing body for its entries' values (see `parseBody`); every body is parsed whole.
   * The lake is the same either way: tests compare both.
   */
  scanLists?: boolean;
  /**
   * Aborted when the run is interrupted (Ctrl-C, SIGTERM): a retry's wait ends at once and a request in flight
   * is cancelled, instead of the process sitting out a backoff of up to a minute before it can stop.
   */
  signal?: AbortSignal;
}

/** The request was not sent or not finished because the run was interrupted: nobody will use its answer. */
export class RequestInterrupted extends Error {
  constructor(endpoint: string) {
    super(`${endpoint}: interrupted`);
    this.name = 'RequestInterrupted';
  }
}

export interface HttpRequest {
  /** A short name for messages and stats, e.g. `explorer #2`. */
  endpoint: string;
  url: URL;
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body?: string;
  /**
   * The call's lineage record (the window's `requests` row), when the caller keeps one: the transport fills in
   * what was sent and what the last attempt got. Only then is a body hashed.
   */
  record?: RequestRecord;
}

/** Thrown by an envelope check: the body parsed, but the API says the call failed. */
export class EnvelopeFailure extends Error {
  constructor(
    readonly kind: 'transient' | 'terminal',
    readonly envelopeStatus: string | undefined,
    readonly apiMessage: string,
    readonly throttled = false,
  ) {
    super(apiMessage);
  }
}

/**
 * Validates a parsed body and returns what the caller wants from it, or throws EnvelopeFailure. `bytes` is the
 * body as received, for callers that stage pages without re-serialising them: its buffer is lent by the body pool
 * (body-pool.ts) and serves another body once staging has written the page, so a caller that keeps the bytes longer
 * copies them. When the call asked for a list scan and the body was scanned, `list` is set and `body` holds an
 * empty array in the list's place.
 */
export type EnvelopeCheck<T> = (body: unknown, bytes: Buffer, list?: ScannedList) => T;

/** An HTTP 200's body as JSON: the whole parsed body, or the scanned list and the rest of the body parsed. */
export interface ParsedBody {
  /** The parsed body; where `list` is set, with `[]` in the list's place. */
  body: unknown;
  list?: ScannedList;
}

/**
 * Parses a success body. With a `scan` (and a body within its size), the body is first scanned for its list
 * (see scan.ts): then only the text around the list is parsed, and the entries stay bytes until someone reads
 * them. A body the scanner does not take is parsed whole, as it always was. Returns undefined when the body is
 * not JSON. Shared by every transport, so the benchmark's replay measures the path a live run takes.
 */
export function parseBody(bytes: Buffer, scan?: ListScan): ParsedBody | undefined {
  if (scan && bytes.length <= (scan.maxBytes ?? Infinity)) {
    const list = scanList(bytes, scan.at, scan.fields);
    if (list) {
      // The scanner validated the whole body, so the text around the list parses; were it ever not to, the
      // body is parsed whole below, as if it had not been scanned.
      try {
        return { body: JSON.parse(list.envelopeText()), list };
      } catch {
        /* parsed whole below */
      }
    }
  }
  try {
    return { body: JSON.parse(bytes.toString('utf8')) };
  } catch {
    return undefined;
  }
}

/** How a non-200 HTTP status is treated. 501 and 505 say the server will never do it; other 5xx pass. */
export function classifyStatus(status: number): { kind: FailureKind; reason: FailureReason } {
  if (status === 429) return { kind: 'transient', reason: 'http-429' };
  if (status === 408 || status === 425) return { kind: 'transient', reason: 'http-4xx' };
  if (status >= 500 && status <= 599) return { kind: status === 501 || status === 505 ? 'terminal' : 'transient', reason: 'http-5xx' };
  if (status >= 400 && status <= 499) return { kind: 'terminal', reason: 'http-4xx' };
  return { kind: 'terminal', reason: 'http-other' };
}

/** `Retry-After` in milliseconds from `now`: delay-seconds or an HTTP date; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | string[] | undefined, now: number): number | undefined {
  const text = (Array.isArray(value) ? value[0] : value)?.trim();
  if (text === undefined || text === '') return undefined;
  if (/^\d+(\.\d+)?$/.test(text)) return Number(text) * 1000;
  if (!/[a-z]/i.test(text)) return undefined; // a negative or odd number, not a date
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** Pulls a human message out of an error body, whatever the API's shape. */
function messageOf(body: unknown): { status?: string; message?: string } {
  if (body && typeof body === 'object') {
    const b = body as Record<string, unknown>;
    const s = b.status ?? b.type;
    const status = typeof s === 'string' ? s : typeof s === 'number' ? String(s) : undefined;
    const message = typeof b.message === 'string' ? b.message : undefined;
    return { status, message };
  }
  return {};
}

const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT', 'ETIMEDOUT']);
/** undici's own complaints about our request: retrying cannot help. */
const PROGRAMMING_CODES = new Set(['UND_ERR_INVALID_ARG', 'UND_ERR_NOT_SUPPORTED', 'ERR_INVALID_URL']);

class AttemptTimeout extends Error {
  readonly code = 'CHAINLAKE_TOTAL_TIMEOUT';
}

/**
 * The HTTP layer shared by both API clients: one keep-alive undici pool per origin, one in-flight bound and
 * one rate limiter for the whole run, and the retry loop that sorts failures into transient and terminal.
 * A call succeeds only on HTTP 200 with a body that parses and passes the caller's envelope check.
 */
export class HttpTransport {
  private readonly pools = new Map<string, Pool>();
  private readonly limit: LimitFunction;
  readonly limiter: RateLimiter;
  readonly retry: RetryPolicy;
  readonly timeouts: Timeouts;
  private readonly clock: Clock;
  private readonly random: () => number;
  /** The job's daily request quota, when it has one (set by the run before its first request). */
  quota: QuotaGate | undefined;

  constructor(private readonly opts: TransportOptions) {
    if (!Number.isInteger(opts.concurrency) || opts.concurrency < 1) throw new RangeError(`concurrency must be a positive integer, got ${opts.concurrency}`);
    this.limit = pLimit(opts.concurrency);
    this.clock = opts.clock ?? systemClock;
    this.random = opts.random ?? Math.random;
    this.limiter = new RateLimiter({ rps: opts.rps, burst: opts.burst, clock: this.clock });
    this.retry = { ...DEFAULT_RETRY, ...opts.retry };
    this.timeouts = { ...DEFAULT_TIMEOUTS, ...opts.timeouts };
    const r = this.retry;
    if (!(Number.isInteger(r.maxAttempts) && r.maxAttempts >= 1)) throw new RangeError(`retry.maxAttempts must be an integer >= 1, got ${r.maxAttempts}`);
    for (const [k, v] of Object.entries({ ...r, ...this.timeouts })) if (!(v >= 0)) throw new RangeError(`${k} must be >= 0, got ${v}`);
  }

  private pool(origin: string): Pool {
    let pool = this.pools.get(origin);
    if (!pool) {
      pool = new Pool(origin, {
        connections: this.opts.concurrency,
        connectTimeout: this.timeouts.connectMs,
        headersTimeout: this.timeouts.headersMs,
        bodyTimeout: this.timeouts.bodyMs,
        keepAliveTimeout: 30_000,
      });
      this.pools.set(origin, pool);
    }
    return pool;
  }

  /**
   * The wait before attempt `attempt + 1`: full jitter over an exponentially growing cap; with `Retry-After`,
   * at least what the server asked and never less than the base delay (`Retry-After: 0` is no hot loop), plus
   * jitter so that a crowd of clients told the same instant does not return at once.
   */
  backoffMs(attempt: number, retryAfterMs: number | undefined): number {
    const cap = Math.min(this.retry.maxDelayMs, this.retry.baseDelayMs * 2 ** (attempt - 1));
    const jittered = Math.max(this.retry.baseDelayMs / 10, this.random() * cap);
    if (retryAfterMs === undefined) return jittered;
    return Math.max(Math.max(retryAfterMs, this.retry.baseDelayMs) + this.random() * this.retry.baseDelayMs, jittered);
  }

  /** The scan to apply to success bodies, unless this transport was told not to scan. */
  protected listScan(scan: ListScan | undefined): ListScan | undefined {
    return this.opts.scanLists === false ? undefined : scan;
  }

  /**
   * Sends a request (with retries) and returns what `check` makes of the success body. With `scan`, the body's
   * list is located as bytes and the check gets it beside the rest of the body (see `parseBody`).
   */
  async call<T>(req: HttpRequest, check: EnvelopeCheck<T>, acct: Accounting, scan?: ListScan): Promise<T> {
    let waited = 0;
    const signal = this.opts.signal;
    const record = req.record;
    if (record) describeCall(record, req.method, req.url, req.body);
    for (let attempt = 1; ; attempt++) {
      if (signal?.aborted) throw new RequestInterrupted(req.endpoint);
      let error: ApiError;
      try {
        return await this.limit(() => this.attempt(req, check, acct, attempt, scan));
      } catch (e) {
        if (record) record.error = e instanceof ApiError ? e.summary : (e as Error).message;
        if (!(e instanceof ApiError)) throw e;
        error = e;
      }
      acct.recordFailure(error.details.reason);
      if (error.details.throttled) acct.throttles++;
      if (error.kind === 'terminal') throw error;
      if (attempt >= this.retry.maxAttempts) throw giveUp(error, `gave up after ${attempt} attempts`);
      const delay = this.backoffMs(attempt, error.details.retryAfterMs);
      if (waited + delay > this.retry.maxTotalDelayMs) {
        throw giveUp(
          error,
          `gave up after ${attempt} attempts: waiting ${Math.round(delay)} ms more would exceed the ${this.retry.maxTotalDelayMs} ms retry budget`,
        );
      }
      waited += delay;
      this.opts.onRetry?.({ endpoint: req.endpoint, reason: error.summary, attempt: attempt + 1, maxAttempts: this.retry.maxAttempts, delayMs: delay });
      acct.retries++;
      acct.backoffWaitMs += delay;
      await this.clock.sleep(delay, signal);
    }
  }

  private async attempt<T>(req: HttpRequest, check: EnvelopeCheck<T>, acct: Accounting, attempt: number, scan: ListScan | undefined): Promise<T> {
    const grantedAt = await this.admit(acct);
    const url = redactUrl(req.url);
    acct.recordRequest();
    const record = req.record;
    if (record) {
      record.attempts = attempt;
      record.sentAt ??= new Date().toISOString();
      record.httpStatus = record.bytes = record.bodySha256 = record.error = null;
    }
    this.opts.onAttempt?.({ endpoint: req.endpoint, url, attempt, at: grantedAt });
    const base = { endpoint: req.endpoint, url, attempt };
    const fail: Fail = (summary, d) => {
      const error = new ApiError(summary, { ...base, ...d });
      if (d.throttled) this.limiter.onThrottle(grantedAt, d.retryAfterMs);
      return error;
    };
    const started = performance.now();
    const res = await this.send(req, fail);
    acct.recordResponse(performance.now() - started, res.bytes.length);
    if (record) {
      record.httpStatus = res.statusCode;
      record.bytes = res.bytes.length;
      record.bodySha256 = bodySha256(res.bytes);
    }
    const retryAfterMs = parseRetryAfter(res.headers['retry-after'], this.clock.now());
    if (res.statusCode !== 200) throw refusal(req, res, retryAfterMs, fail);
    const value = this.accept(res.bytes, check, scan, retryAfterMs, fail);
    this.limiter.onSuccess();
    return value;
  }

  /**
   * Waits for the rate limiter's turn and takes one request of the daily quota (request N+1 beyond it is never sent,
   * and not retried: QuotaReachedError is no ApiError); returns when the turn was granted.
   */
  private async admit(acct: Accounting): Promise<number> {
    const asked = this.clock.now();
    const grantedAt = await this.limiter.acquire();
    acct.rateWaitMs += Math.max(0, grantedAt - asked);
    if (this.quota) {
      await this.quota.ready?.();
      if (!this.quota.take()) throw new QuotaReachedError(this.quota.limit);
    }
    return grantedAt;
  }

  /** One HTTP exchange, whole body read, within the attempt's total timeout; stopped at once by the transport's signal. */
  private async send(req: HttpRequest, fail: Fail): Promise<Reply> {
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(new AttemptTimeout(`no complete response within ${this.timeouts.totalMs} ms`)), this.timeouts.totalMs);
    const interrupt = (): void => abort.abort(new RequestInterrupted(req.endpoint));
    this.opts.signal?.addEventListener('abort', interrupt, { once: true });
    try {
      const res = await this.pool(req.url.origin).request({
        path: req.url.pathname + req.url.search,
        method: req.method,
        headers: { 'user-agent': 'chainlake', ...req.headers },
        body: req.body,
        signal: abort.signal,
      });
      return { statusCode: res.statusCode, headers: res.headers, bytes: await readBody(res.body, Number(res.headers['content-length']) || undefined) };
    } catch (cause) {
      if (abort.signal.reason instanceof RequestInterrupted) throw abort.signal.reason;
      const code = abort.signal.aborted ? 'CHAINLAKE_TOTAL_TIMEOUT' : ((cause as { code?: string }).code ?? (cause as Error).name);
      const timeout = TIMEOUT_CODES.has(code) || code === 'CHAINLAKE_TOTAL_TIMEOUT';
      const what = abort.signal.aborted ? (abort.signal.reason as Error).message : (cause as Error).message;
      throw fail(`${timeout ? 'timeout' : 'network failure'} (${code}: ${what})`, {
        kind: PROGRAMMING_CODES.has(code) ? 'terminal' : 'transient',
        reason: timeout ? 'timeout' : 'network',
        cause,
      });
    } finally {
      clearTimeout(timer);
      this.opts.signal?.removeEventListener('abort', interrupt);
    }
  }

  /** What `check` makes of an HTTP 200's body; a body that is no JSON, or an envelope that reports a failure, is an ApiError. */
  private accept<T>(bytes: Buffer, check: EnvelopeCheck<T>, scan: ListScan | undefined, retryAfterMs: number | undefined, fail: Fail): T {
    const got = parseBody(bytes, this.listScan(scan));
    if (!got) {
      const text = bytes.toString('utf8');
      const what = text.trimStart().startsWith('<') ? 'an HTML body' : text.length === 0 ? 'an empty body' : 'a truncated or non-JSON body';
      throw fail(`HTTP 200 with ${what} (${bytes.length} bytes)`, {
        kind: 'transient',
        reason: 'bad-body',
        httpStatus: 200,
        apiMessage: snippet(text),
        retryAfterMs,
      });
    }
    try {
      return check(got.body, bytes, got.list);
    } catch (e) {
      if (!(e instanceof EnvelopeFailure)) throw e;
      throw fail(e.throttled ? 'throttled by the API (HTTP 200 throttle envelope)' : `the API reported a failure in an HTTP 200`, {
        kind: e.kind,
        reason: e.throttled ? 'throttle' : 'envelope',
        httpStatus: 200,
        envelopeStatus: e.envelopeStatus,
        apiMessage: e.apiMessage,
        throttled: e.throttled,
        retryAfterMs,
      });
    }
  }

  async close(): Promise<void> {
    await Promise.all([...this.pools.values()].map((p) => p.close()));
    this.pools.clear();
  }
}

/** A response as one attempt read it. */
interface Reply {
  statusCode: number;
  headers: Record<string, string | string[] | undefined>;
  bytes: Buffer;
}

/** Makes an attempt's ApiError (the endpoint, URL and attempt filled in) and tells the limiter of a throttle. */
type Fail = (summary: string, details: Omit<ApiErrorDetails, 'endpoint' | 'url' | 'attempt'>) => ApiError;

/** A status other than 200 as an ApiError: its class (transient or terminal), and what the body says of it. */
function refusal(req: HttpRequest, res: Reply, retryAfterMs: number | undefined, fail: Fail): ApiError {
  const { statusCode, headers, bytes } = res;
  const text = bytes.toString('utf8');
  let body: unknown;
  let parsed = true;
  try {
    body = JSON.parse(text);
  } catch {
    parsed = false;
  }
  const { status, message } = parsed ? messageOf(body) : {};
  let { kind, reason } = classifyStatus(statusCode);
  // A JSON body that does not parse was cut short or garbled: what the API said is unknown, and an endpoint
  // may take a terminal status with its message as an answer ("not verified"), so it is asked again.
  const brokenJson = !parsed && /^\s*[{[]/.test(text);
  if (brokenJson && kind === 'terminal') ({ kind, reason } = { kind: 'transient', reason: 'bad-body' });
  const location = statusCode >= 300 && statusCode < 400 && typeof headers.location === 'string' ? ` to ${redactUrl(new URL(headers.location, req.url))}` : '';
  return fail(`HTTP ${statusCode}${location}${brokenJson ? ` with a truncated or malformed JSON body (${bytes.length} bytes)` : ''}`, {
    kind,
    reason,
    httpStatus: statusCode,
    envelopeStatus: status,
    apiMessage: message ?? (parsed || text.length === 0 ? undefined : snippet(text)),
    throttled: statusCode === 429,
    retryAfterMs,
  });
}

function snippet(text: string): string {
  const t = text.replace(/\s+/g, ' ').trim();
  return t.length > 120 ? `${t.slice(0, 120)}…` : t;
}

/** The last attempt's error, restated as the call's outcome. */
function giveUp(last: ApiError, why: string): ApiError {
  return new ApiError(`${why}; last: ${last.summary}`, { ...last.details, cause: last });
}
