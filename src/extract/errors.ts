/** Why a call failed, as the retry loop sees it. */
export type FailureKind = 'transient' | 'terminal';

export interface ApiErrorDetails {
  kind: FailureKind;
  endpoint: string;
  /** The request URL. The API key travels in a header only, so the URL never carries it. */
  url: string;
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

export class ApiError extends Error {
  readonly details: ApiErrorDetails;
  constructor(summary: string, details: ApiErrorDetails) {
    const parts = [
      `${details.endpoint}: ${summary}`,
      `url=${details.url}`,
      `attempt=${details.attempt}`,
      details.httpStatus !== undefined ? `http=${details.httpStatus}` : undefined,
      details.envelopeStatus !== undefined ? `status=${JSON.stringify(details.envelopeStatus)}` : undefined,
      details.apiMessage !== undefined ? `message=${JSON.stringify(details.apiMessage)}` : undefined,
    ].filter(Boolean);
    super(parts.join(' '), details.cause !== undefined ? { cause: details.cause } : undefined);
    this.name = 'ApiError';
    this.details = details;
  }
  get kind(): FailureKind {
    return this.details.kind;
  }
}

/** The window cannot be fetched as asked (a single block over the result-window cap, count drift that never settles). */
export class WindowError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WindowError';
  }
}
