import pLimit, { type LimitFunction } from 'p-limit';
import { Pool } from 'undici';
import type { Accounting } from './accounting.js';
import { systemClock, type Clock } from './clock.js';
import { ApiError, type ApiErrorDetails } from './errors.js';
import { RateLimiter } from './rate-limiter.js';

export interface RetryPolicy {
  maxAttempts: number;
  baseDelayMs: number;
  maxDelayMs: number;
  /** Give up once the waits of one call would add up to more than this. */
  maxTotalDelayMs: number;
}

export interface Timeouts {
  connectMs: number;
  headersMs: number;
  bodyMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { maxAttempts: 8, baseDelayMs: 250, maxDelayMs: 30_000, maxTotalDelayMs: 300_000 };
export const DEFAULT_TIMEOUTS: Timeouts = { connectMs: 10_000, headersMs: 30_000, bodyMs: 60_000 };

export interface TransportOptions {
  /** Requests in flight at once, across every window of the run. */
  concurrency: number;
  /** Requests per second across the run; undefined means unbounded. */
  rps?: number;
  burst?: number;
  retry?: Partial<RetryPolicy>;
  timeouts?: Partial<Timeouts>;
  clock?: Clock;
  random?: () => number;
}

export interface HttpRequest {
  /** A short name for messages and stats, e.g. `explorer #2`. */
  endpoint: string;
  url: URL;
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body?: string;
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

/** Validates a parsed body and returns what the caller wants from it, or throws EnvelopeFailure. */
export type EnvelopeCheck<T> = (body: unknown) => T;

const TRANSIENT_HTTP = new Set([408, 425, 429, 500, 502, 503, 504]);

function parseRetryAfter(value: string | string[] | undefined, now: number): number | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (text === undefined || text.trim() === '') return undefined;
  if (/^\d+(\.\d+)?$/.test(text.trim())) return Number(text) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** Pulls a human message out of an error body, whatever the API's shape. */
function messageOf(body: unknown): { status?: string; message?: string } {
  if (body && typeof body === 'object') {
    const b = body as Record<string, unknown>;
    const status = typeof b.status === 'string' ? b.status : typeof b.type === 'string' ? b.type : undefined;
    const message = typeof b.message === 'string' ? b.message : undefined;
    return { status, message };
  }
  return {};
}

/**
 * The HTTP layer shared by both API clients: one keep-alive undici pool per origin, one in-flight bound and
 * one rate limiter for the whole run, and the retry loop that sorts failures into transient and terminal.
 */
export class HttpTransport {
  private readonly pools = new Map<string, Pool>();
  private readonly limit: LimitFunction;
  readonly limiter: RateLimiter;
  private readonly retry: RetryPolicy;
  private readonly timeouts: Timeouts;
  private readonly clock: Clock;
  private readonly random: () => number;

  constructor(private readonly opts: TransportOptions) {
    if (!Number.isInteger(opts.concurrency) || opts.concurrency < 1) throw new RangeError(`concurrency must be a positive integer, got ${opts.concurrency}`);
    this.limit = pLimit(opts.concurrency);
    this.clock = opts.clock ?? systemClock;
    this.random = opts.random ?? Math.random;
    this.limiter = new RateLimiter(opts.rps, opts.burst ?? Math.max(1, Math.ceil((opts.rps ?? 1) / 10)), this.clock);
    this.retry = { ...DEFAULT_RETRY, ...opts.retry };
    this.timeouts = { ...DEFAULT_TIMEOUTS, ...opts.timeouts };
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

  /** Backoff before attempt `attempt + 1`: full jitter, or at least what the server asked for. */
  backoffMs(attempt: number, retryAfterMs: number | undefined): number {
    const cap = Math.min(this.retry.maxDelayMs, this.retry.baseDelayMs * 2 ** (attempt - 1));
    const jitter = this.random() * cap;
    if (retryAfterMs !== undefined) {
      // `Retry-After: 0` must not turn into a hot loop: never wait less than the base delay.
      return Math.max(retryAfterMs, this.retry.baseDelayMs) + this.random() * this.retry.baseDelayMs;
    }
    return Math.max(this.retry.baseDelayMs / 10, jitter);
  }

  async call<T>(req: HttpRequest, check: EnvelopeCheck<T>, acct: Accounting): Promise<T> {
    let waited = 0;
    for (let attempt = 1; ; attempt++) {
      let error: ApiError;
      try {
        return await this.limit(() => this.attempt(req, check, acct, attempt));
      } catch (e) {
        if (!(e instanceof ApiError)) throw e;
        error = e;
      }
      if (error.details.throttled) {
        acct.throttles++;
        this.limiter.onThrottle();
      }
      if (error.kind === 'terminal' || attempt >= this.retry.maxAttempts) throw error;
      const delay = this.backoffMs(attempt, error.details.retryAfterMs);
      if (waited + delay > this.retry.maxTotalDelayMs) throw error;
      waited += delay;
      acct.retries++;
      await this.clock.sleep(delay);
    }
  }

  private async attempt<T>(req: HttpRequest, check: EnvelopeCheck<T>, acct: Accounting, attempt: number): Promise<T> {
    await this.limiter.acquire();
    const base: Omit<ApiErrorDetails, 'kind'> = { endpoint: req.endpoint, url: req.url.toString(), attempt };
    const started = performance.now();
    let statusCode: number;
    let text: string;
    let retryAfterMs: number | undefined;
    try {
      const res = await this.pool(req.url.origin).request({
        path: req.url.pathname + req.url.search,
        method: req.method,
        headers: req.headers,
        body: req.body,
      });
      statusCode = res.statusCode;
      retryAfterMs = parseRetryAfter(res.headers['retry-after'], Date.now());
      text = await res.body.text();
    } catch (cause) {
      const code = (cause as { code?: string }).code ?? (cause as Error).name;
      throw new ApiError(`network failure (${code}: ${(cause as Error).message})`, { ...base, kind: 'transient', cause });
    }
    acct.recordResponse(performance.now() - started, text.length);

    let body: unknown;
    let parsed = true;
    try {
      body = JSON.parse(text);
    } catch {
      parsed = false;
    }

    if (statusCode < 200 || statusCode >= 300) {
      const { status, message } = parsed ? messageOf(body) : {};
      const kind = TRANSIENT_HTTP.has(statusCode) ? 'transient' : 'terminal';
      throw new ApiError(`HTTP ${statusCode}`, {
        ...base,
        kind,
        httpStatus: statusCode,
        envelopeStatus: status,
        apiMessage: message ?? (parsed ? undefined : text.slice(0, 120)),
        throttled: statusCode === 429,
        retryAfterMs,
      });
    }
    if (!parsed) {
      const what = text.trimStart().startsWith('<') ? 'an HTML body' : text.length === 0 ? 'an empty body' : 'a truncated or non-JSON body';
      throw new ApiError(`HTTP ${statusCode} with ${what}`, { ...base, kind: 'transient', httpStatus: statusCode });
    }
    try {
      const value = check(body);
      this.limiter.onSuccess();
      return value;
    } catch (e) {
      if (!(e instanceof EnvelopeFailure)) throw e;
      throw new ApiError(e.throttled ? 'throttled by the API' : `the API reported a failure`, {
        ...base,
        kind: e.kind,
        httpStatus: statusCode,
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
