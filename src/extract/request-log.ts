import { createHash } from 'node:crypto';
import { SECRET_PARAM } from './errors.js';

/**
 * One call a window made (its retries are its attempts), as the catalog's `requests` table records it: the
 * lineage from a window to what the API answered. Filled by the transport (status, attempts, bytes, hash, time)
 * and by the endpoint fetcher (endpoint id, parameters, rows). Never holds a credential: the API key travels in
 * a header, which is not recorded, and a query parameter whose name suggests a secret is left out.
 */
export interface RequestRecord {
  /** The endpoint's id, as `chainlake describe --endpoints` lists it (e.g. `account_transactions`). */
  endpoint: string;
  method: 'GET' | 'POST';
  /** The URL's path (below the API's host). */
  path: string;
  /** The query parameters (and a POST's JSON body as `body`), without any secret: JSON text. */
  params: string;
  /** The last attempt's HTTP status; null when no response came (network failure, timeout, interruption). */
  httpStatus: number | null;
  /** Attempts sent (1 unless retried); 0 when the call was never sent (the daily quota, an interruption). */
  attempts: number;
  /** Entries the page held (null when the call failed). */
  rows: number | null;
  /** The last response's body bytes. */
  bytes: number | null;
  /** sha256 (hex) of the last response's body as received. */
  bodySha256: string | null;
  /** When the call's first attempt was sent (ISO, UTC). */
  sentAt: string | null;
  /** Why the call failed, when it did (the last attempt's summary). */
  error: string | null;
}

/** A record for a call of `endpoint` about to be made; the transport fills in the rest (see `describeCall`). */
export function newRequestRecord(endpoint: string): RequestRecord {
  return {
    endpoint,
    method: 'GET',
    path: '',
    params: '{}',
    httpStatus: null,
    attempts: 0,
    rows: null,
    bytes: null,
    bodySha256: null,
    sentAt: null,
    error: null,
  };
}

/** What is sent: method, path, and the parameters without any whose name suggests a secret (a POST's body as `body`). */
export function describeCall(record: RequestRecord, method: 'GET' | 'POST', url: URL, body: string | undefined): void {
  const params: Record<string, unknown> = {};
  for (const [k, v] of url.searchParams) if (!SECRET_PARAM.test(k)) params[k] = v;
  if (body !== undefined) {
    try {
      params.body = JSON.parse(body) as unknown;
    } catch {
      params.body = body;
    }
  }
  record.method = method;
  record.path = url.pathname;
  record.params = JSON.stringify(params);
}

/** The hash recorded for a body. */
export const bodySha256 = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex');
