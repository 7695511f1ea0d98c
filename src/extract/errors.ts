import { ChainlakeError } from '../errors.js';
/** Why a call failed, as the retry loop sees it. */
export type FailureKind = 'transient' | 'terminal';

/**
 * A short, stable name of what went wrong, for accounting and reports:
 * `http-429`, `http-5xx`, `http-4xx` (and other non-2xx), `throttle` (a throttle envelope in an HTTP 200),
 * `envelope` (any other failure envelope), `timeout`, `network` (reset, refused...), `bad-body` (truncated,
 * non-JSON, HTML).
 */
export type FailureReason = 'http-429' | 'http-5xx' | 'http-4xx' | 'http-other' | 'throttle' | 'envelope' | 'timeout' | 'network' | 'bad-body';

export interface ApiErrorDetails {
  kind: FailureKind;
  reason: FailureReason;
  endpoint: string;
  /** The request URL, redacted (see `redactUrl`). The API key travels in a header only. */
  url: string;
  /** 1-based attempt that produced this error. */
  attempt: number;
  httpStatus?: number;
  envelopeStatus?: string;
  apiMessage?: string;
  /** Set when the failure is the server pacing us (429, throttle envelope). */
  throttled?: boolean;
  /** Milliseconds the server asked us to wait (Retry-After). */
  retryAfterMs?: number;
  cause?: unknown;
}

export const SECRET_PARAM = /(key|token|secret|signature|password|passwd|auth|credential)/i;

/**
 * The URL as it may appear in messages, logs and the catalog: no user info, and the value of any query
 * parameter whose name suggests a credential replaced by `***` (a base URL from a job could carry one).
 */
export function redactUrl(url: URL | string): string {
  let u: URL;
  try {
    u = new URL(url.toString());
  } catch {
    return '<invalid url>';
  }
  if (u.username || u.password) {
    u.username = '***';
    u.password = '';
  }
  for (const name of [...new Set(u.searchParams.keys())]) if (SECRET_PARAM.test(name)) u.searchParams.set(name, '***');
  return u.toString();
}

export class ApiError extends ChainlakeError {
  readonly details: ApiErrorDetails;
  constructor(
    /** What happened, without the context fields (`HTTP 503`, `timeout (...)`). */
    readonly summary: string,
    details: ApiErrorDetails,
  ) {
    const parts = [
      `${details.endpoint}: ${summary}`,
      `url=${details.url}`,
      `attempt=${details.attempt}`,
      details.httpStatus !== undefined ? `http=${details.httpStatus}` : undefined,
      details.envelopeStatus !== undefined ? `status=${JSON.stringify(details.envelopeStatus)}` : undefined,
      details.apiMessage !== undefined ? `message=${JSON.stringify(details.apiMessage)}` : undefined,
    ].filter(Boolean);
    // 401/403: the key is wrong or missing, which no re-run fixes: a person must (exit 2).
    const refused = details.httpStatus === 401 || details.httpStatus === 403;
    super(parts.join(' '), {
      cause: details.cause,
      code: refused ? 'CHAINLAKE_API_REFUSED' : 'CHAINLAKE_API_ERROR',
      hint: refused ? REFUSED_HINT : undefined,
    });
    this.details = details;
  }
  get kind(): FailureKind {
    return this.details.kind;
  }
}

/**
 * The window cannot be fetched as asked: a single block over the result-window cap, a count that never
 * settles, an endpoint without a block filter holding more rows than the cap.
 */
export class WindowError extends ChainlakeError {
  constructor(
    message: string,
    /** The block that alone holds more rows than the cap, when that is the problem. */
    readonly block?: number,
  ) {
    super(message, { code: 'CHAINLAKE_WINDOW' });
  }
}

/** Connection-level failures that say nothing answers at the address (as opposed to a reset or a timeout). */
const UNREACHABLE_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);

/** The origin (scheme, host, port) `e` could not connect to, when `e` is a request that never reached a server. */
export function unreachableOrigin(e: unknown): string | undefined {
  if (!(e instanceof ApiError) || e.details.reason !== 'network') return undefined;
  for (let c: unknown = e.details.cause, depth = 0; c && depth < 5; c = (c as { cause?: unknown }).cause, depth++) {
    const code = (c as { code?: unknown }).code;
    if (typeof code === 'string' && UNREACHABLE_CODES.has(code)) {
      try {
        return new URL(e.details.url).origin;
      } catch {
        return e.details.url;
      }
    }
  }
  return undefined;
}

/** What to do about a key the API refuses (HTTP 401/403). */
export const REFUSED_HINT = 'the API refused the key: set CHAINLAKE_API_KEY (or the job\'s "apiKey") to a valid key for this API';

/** The hint for an API nothing answers at: the settings that name its address. */
export const UNREACHABLE_HINT =
  'check the API address: CHAINLAKE_MAINNET_URL, CHAINLAKE_TESTNET_URL or CHAINLAKE_FINANCE_URL (or the job\'s "endpoints"), and that this machine can reach it; the lake was not changed';

/**
 * Not one request of the command reached the API: no server at the address. A person must fix the address
 * or the network (exit 2); a re-run alone would fail the same way every night.
 */
export class ApiUnreachableError extends ChainlakeError {
  constructor(
    readonly origin: string,
    cause: unknown,
  ) {
    super(`nothing answers at ${origin}: ${(cause as Error).message}`, { cause, code: 'CHAINLAKE_API_UNREACHABLE', hint: UNREACHABLE_HINT });
  }
}

/** For a command's first request (a head lookup): nothing answering there is a wrong address (exit 2). */
export function rethrowUnreachable(e: unknown): never {
  const origin = unreachableOrigin(e);
  throw origin === undefined ? e : new ApiUnreachableError(origin, e);
}
