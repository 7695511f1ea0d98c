// Decoding in JavaScript with viem's ABI decoder, for events DuckDB cannot decode with plain functions
// (strings, bytes, arrays, tuples, signed and anonymous events, ERC-1155 batches). Each log becomes staged
// JSON lines of the dataset's columns, or a reason.

import type { AbiParameter } from 'viem';
import { viem } from '../evm/viem.js';
import { signatureText } from './abi.js';
import type { EventSource } from './datasets.js';
import { topicCount } from './sql.js';
import { duckType, elementOf, exactJson, hasWide, isDynamicOrComposite, isWideInt, stageValue } from './types.js';

export type Decoded = { rows: Record<string, unknown>[] } | { reason: string };

const indexedOf = (p: AbiParameter): boolean => (p as { indexed?: boolean }).indexed === true;

/** The staged JSON type of each column a source writes (`__pos` is the batch position). */
export function stagedSpec(s: EventSource): Record<string, string> {
  return { __row: 'BIGINT', __pos: 'INTEGER', ...columnTypes(s, true) };
}

/** The lake type of each staged column (what it is cast to). */
export function finalTypes(s: EventSource): Record<string, string> {
  return columnTypes(s, false);
}

/** Each event column's type, staged or final (see duckType), with the `_raw` companion of a wide one. */
function columnTypes(s: EventSource, staged: boolean): Record<string, string> {
  const out: Record<string, string> = {};
  s.event.inputs.forEach((p, i) => {
    const t = s.targets[i]!;
    if (indexedOf(p) && isDynamicOrComposite(p)) {
      out[t.column] = 'VARCHAR';
      return;
    }
    const q = t.explode ? elementOf(p) : p;
    out[t.column] = t.text ? 'VARCHAR' : duckType(q, staged);
    if (!t.text && hasWide(q)) out[`${t.column}_raw`] = 'VARCHAR';
  });
  return out;
}

const firstLine = (e: unknown): string => ((e as Error).message ?? String(e)).split('\n')[0]!.replace(/\s+/g, ' ').trim();

/** One column's staged value (and its `_raw` companion) from a decoded value. */
function put(row: Record<string, unknown>, p: AbiParameter, column: string, text: boolean, v: unknown): void {
  if (text) {
    const n = BigInt(v as bigint);
    if (n < 0n) throw new Error(`${column}: negative id`);
    row[column] = n.toString();
    return;
  }
  const wide = { overflow: false };
  row[column] = stageValue(p, v, wide);
  if (hasWide(p)) row[`${column}_raw`] = wide.overflow ? (isWideInt(p.type) ? String(v) : exactJson(p, v)) : null;
}

/** Decodes one log as the event of `s`: the rows it gives, or why it does not fit. */
export function decodeLog(s: EventSource, topics: readonly (string | null)[], data: string | null): Decoded {
  const sig = signatureText(s.event);
  const present = topics.filter((t): t is string => t !== null);
  const expected = topicCount(s);
  if (present.length !== expected) return { reason: `${sig}: ${present.length} topics, ${expected} expected` };
  const inputs = s.event.inputs;
  const row: Record<string, unknown> = {};
  const exploded: { p: AbiParameter; column: string; text: boolean; values: unknown[] }[] = [];
  try {
    let k = s.topic0 === null ? 0 : 1;
    const plain: AbiParameter[] = [];
    const plainAt: number[] = [];
    inputs.forEach((p, i) => {
      if (!indexedOf(p)) {
        plain.push(p);
        plainAt.push(i);
        return;
      }
      const topic = present[k++]!.toLowerCase();
      const t = s.targets[i]!;
      if (isDynamicOrComposite(p)) {
        row[t.column] = topic;
        return;
      }
      if (p.type === 'address' && !topic.startsWith('0x000000000000000000000000')) throw new Error(`${p.name || i}: not a clean address word (high bytes set)`);
      if (p.type === 'bool' && !/^0x0{63}[01]$/.test(topic)) throw new Error(`${p.name || i}: not a clean bool word`);
      put(row, p, t.column, t.text === true, viem().decodeAbiParameters([p], topic as `0x${string}`)[0]);
    });
    const values = plain.length ? viem().decodeAbiParameters(plain, ((data ?? '0x') || '0x') as `0x${string}`) : [];
    plain.forEach((p, j) => {
      const i = plainAt[j]!;
      const t = s.targets[i]!;
      if (t.explode) exploded.push({ p: elementOf(p), column: t.column, text: t.text === true, values: values[j] as unknown[] });
      else put(row, p, t.column, t.text === true, values[j]);
    });
    if (exploded.length === 0) return { rows: [{ ...row, __pos: 0 }] };
    const n = exploded[0]!.values.length;
    if (exploded.some((e) => e.values.length !== n))
      return { reason: `${sig}: ${exploded.map((e) => `${e.column} has ${e.values.length}`).join(', ')} elements; they must pair up` };
    const rows: Record<string, unknown>[] = [];
    for (let pos = 0; pos < n; pos++) {
      const r: Record<string, unknown> = { ...row, __pos: pos };
      for (const e of exploded) put(r, e.p, e.column, e.text, e.values[pos]);
      rows.push(r);
    }
    return { rows };
  } catch (e) {
    return { reason: `${sig}: ${firstLine(e)}` };
  }
}
