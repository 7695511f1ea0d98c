import { isSafeNumber, LosslessNumber, parse, stringify } from 'lossless-json';
import type { RawPage } from '../extract/pager.js';

/**
 * The `extra` column keeps an entry's unread fields as received. JSON.parse reads every number as a double,
 * so a number the API sends with more digits than a double holds (an id beyond 2^53, a long decimal) would
 * come back changed from JSON.stringify. Such entries are rare and the parse of every page must stay fast, so
 * only when an extra value may have lost digits is the page's body read again, losslessly, for those entries.
 */

/** Whether `v` holds a number JSON.parse may have rounded (at any depth). */
export function mayHaveLostDigits(v: unknown): boolean {
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) return true;
    if (Number.isInteger(v)) return !Number.isSafeInteger(v);
    // 16 or more significant digits printed: the literal may have had more than a double keeps.
    return String(v).replace(/^-?0*\.?0*|e.*$|\./g, '').length >= 16;
  }
  if (v === null || typeof v !== 'object') return false;
  if (Array.isArray(v)) return v.some(mayHaveLostDigits);
  for (const k in v) if (mayHaveLostDigits((v as Record<string, unknown>)[k])) return true;
  return false;
}

/** `like`'s shape picked out of `from`: the same keys at the same depths (objects), whole values elsewhere. */
function pick(from: unknown, like: unknown): unknown {
  if (like === null || typeof like !== 'object' || Array.isArray(like)) return from;
  if (from === null || typeof from !== 'object' || Array.isArray(from)) return from;
  const out: Record<string, unknown> = {};
  for (const k in like) out[k] = pick((from as Record<string, unknown>)[k], (like as Record<string, unknown>)[k]);
  return out;
}

const parsedBodies = new WeakMap<RawPage, unknown[] | null>();

/** The page's entries parsed so that numbers keep their digits (LosslessNumber where a double would not). */
function losslessEntries(raw: RawPage): unknown[] | null {
  let entries = parsedBodies.get(raw);
  if (entries === undefined) {
    entries = null;
    try {
      let at: unknown = parse(raw.bytes.toString('utf8'), null, (s) => (isSafeNumber(s) ? Number(s) : new LosslessNumber(s)));
      for (const k of raw.entriesAt) at = at !== null && typeof at === 'object' ? (at as Record<string, unknown>)[k] : undefined;
      if (Array.isArray(at) && at.length === raw.entries.length) entries = at;
    } catch {
      entries = null;
    }
    parsedBodies.set(raw, entries);
  }
  return entries;
}

/**
 * The `extra` JSON text of entry `index` of a page: `extra` as JSON.stringify writes it, or, where one of its
 * numbers may have lost digits and the page's body is at hand, the same fields with the numbers' digits as
 * received. Without the body (a page cut short at a window's edge keeps none), JSON.parse's value stands.
 */
export function extraText(extra: Record<string, unknown>, raw: RawPage | undefined, index: number): string {
  if (!raw || !mayHaveLostDigits(extra)) return JSON.stringify(extra);
  const entries = losslessEntries(raw);
  const entry = entries?.[index];
  if (entry === undefined) return JSON.stringify(extra);
  return stringify(pick(entry, extra)) ?? JSON.stringify(extra);
}
