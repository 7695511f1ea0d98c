// Request validation shared by the explorer handlers. Every rejection is an ApiError that the server turns
// into the explorer error envelope with the same HTTP status.

import { isAddress, isHash } from './hex.js';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

export const MAX_LIMIT = 1000;
export const DEFAULT_LIMIT = 50;
const DIGITS = /^[0-9]+$/;

export function parseLimit(q: URLSearchParams): number {
  const v = q.get('limit');
  if (v === null || v === '') return DEFAULT_LIMIT;
  if (!DIGITS.test(v) || v.length > 9 || Number(v) < 1 || Number(v) > MAX_LIMIT) {
    throw new ApiError(400, `Invalid limit '${clip(v)}': must be an integer from 1 to ${MAX_LIMIT}`);
  }
  return Number(v);
}

export function parseOffset(q: URLSearchParams): number {
  const v = q.get('offset');
  if (v === null || v === '') return 0;
  if (!DIGITS.test(v) || v.length > 12) throw new ApiError(400, `Invalid offset '${clip(v)}': must be a non-negative integer`);
  return Number(v);
}

export function checkWindow(offset: number, limit: number, resultWindow: number): void {
  if (offset + limit > resultWindow) {
    throw new ApiError(400, `Result window is too large, offset + limit must be less than or equal to ${resultWindow}`);
  }
}

/** Optional block number parameter; `latest` is accepted for end blocks. */
export function parseBlockParam(q: URLSearchParams, name: string, head: number, opts: { required?: boolean; allowLatest?: boolean } = {}): number | null {
  const v = q.get(name);
  if (v === null || v === '') {
    if (opts.required) throw new ApiError(400, `Missing required parameter '${name}'`);
    return null;
  }
  if (opts.allowLatest && v.toLowerCase() === 'latest') return head;
  if (!DIGITS.test(v) || v.length > 15) throw new ApiError(400, `Invalid ${name} '${clip(v)}': must be a non-negative integer block number`);
  return Number(v);
}

export function parseBool(q: URLSearchParams, name: string): boolean {
  const v = q.get(name);
  if (v === null || v === '') return false;
  const l = v.toLowerCase();
  if (l === 'true' || l === '1') return true;
  if (l === 'false' || l === '0') return false;
  throw new ApiError(400, `Invalid ${name} '${clip(v)}': must be true or false`);
}

export function parseEnum<T extends string>(q: URLSearchParams, name: string, values: readonly T[], dflt: T): T {
  const v = q.get(name);
  if (v === null || v === '') return dflt;
  const l = v.toLowerCase() as T;
  if (!values.includes(l)) throw new ApiError(400, `Invalid ${name} '${clip(v)}': must be one of ${values.join(', ')}`);
  return l;
}

export function requireAddress(v: string | undefined, name: string): string {
  if (v === undefined || v === '') throw new ApiError(400, `Missing ${name}`);
  if (!isAddress(v)) throw new ApiError(400, `Invalid ${name} '${clip(v)}': expected a 0x-prefixed 20-byte hex address`);
  return v;
}

export function requireHash(v: string | undefined, name: string): string {
  if (v === undefined || v === '') throw new ApiError(400, `Missing ${name}`);
  if (!isHash(v)) throw new ApiError(400, `Invalid ${name} '${clip(v)}': expected a 0x-prefixed 32-byte hex hash`);
  return v;
}

export function clip(v: string): string {
  return v.length > 80 ? v.slice(0, 77) + '...' : v;
}

/** Block range [from, to] of a query clamped to the visible head; null when empty. */
export function blockRange(start: number | null, end: number | null, head: number, indexed = head): { from: number; to: number; toBlock: number } {
  const from = start ?? 0;
  const toBlock = end === null ? head : Math.min(end, head);
  if (start !== null && end !== null && start > end) {
    throw new ApiError(400, `Invalid block range: startBlock ${start} is greater than endBlock ${end}`);
  }
  // An index behind the head lists the range's rows up to what it has indexed (`to`), under the range asked.
  return { from, to: Math.min(toBlock, indexed), toBlock };
}
