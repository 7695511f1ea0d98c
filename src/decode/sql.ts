// Decoding in DuckDB, for events whose parameters are all static words DuckDB can read with string and
// integer functions (address, bool, uintN, bytesN): the standard token events. Vectorised over the whole
// candidate table, it is far faster than handing each log to JavaScript (the bench's decode scenario).
// 256-bit values that do not fit 128 bits are marked here and finished in JavaScript (`BIG_MARK`), since
// DuckDB has no exact 256-bit arithmetic.

import type { AbiParameter } from 'viem';
import { ident, literal } from '../load/sql.js';
import type { EventSource } from './datasets.js';

/** Prefix of a placeholder for a 256-bit word whose decimal text JavaScript computes (see finishBig). */
export const BIG_MARK = '__big:';

const ZEROS = (n: number): string => literal('0'.repeat(n));

/** Whether DuckDB can decode every parameter of the event (and the event is not anonymous). */
export function sqlDecodable(s: EventSource): boolean {
  if (s.topic0 === null) return false;
  return s.event.inputs.every((p) => p.type === 'address' || p.type === 'bool' || /^uint\d*$/.test(p.type) || /^bytes\d+$/.test(p.type));
}

const bits = (t: string): number => (t === 'uint' ? 256 : Number(t.slice(4)));

/** The 64 hex digits of parameter i's word. */
function words(s: EventSource): string[] {
  let topic = 1;
  let data = 0;
  return s.event.inputs.map((p) => ((p as { indexed?: boolean }).indexed ? `substr(topic_${topic++}, 3)` : `substr(data, ${3 + 64 * data++}, 64)`));
}

function validity(p: AbiParameter, w: string): string | undefined {
  if (p.type === 'address') return `starts_with(${w}, ${ZEROS(24)})`;
  if (p.type === 'bool') return `${w} IN (${ZEROS(64)}, ${literal('0'.repeat(63) + '1')})`;
  if (p.type.startsWith('uint')) {
    const b = bits(p.type);
    return b === 256 ? undefined : `starts_with(${w}, ${ZEROS(64 - b / 4)})`;
  }
  const n = Number(p.type.slice(5));
  return n === 32 ? undefined : `ends_with(${w}, ${ZEROS(64 - 2 * n)})`;
}

const u128 = (w: string): string => `((('0x' || substr(${w}, 33, 16))::UBIGINT::UHUGEINT << 64) + ('0x' || substr(${w}, 49, 16))::UBIGINT::UHUGEINT)`;
const fits128 = (w: string): string => `starts_with(${w}, ${ZEROS(32)})`;
const LIMIT38 = `'100000000000000000000000000000000000000'::UHUGEINT`;

/** SELECT items of parameter i's column(s). */
function valueItems(p: AbiParameter, w: string, column: string, text: boolean): string[] {
  const c = ident(column);
  if (p.type === 'address') return [`'0x' || substr(${w}, 25) AS ${c}`];
  if (p.type === 'bool') return [`substr(${w}, 64, 1) = '1' AS ${c}`];
  if (p.type.startsWith('bytes')) return [`'0x' || substr(${w}, 1, ${2 * Number(p.type.slice(5))}) AS ${c}`];
  const b = bits(p.type);
  if (b <= 24) return [`('0x' || substr(${w}, 57, 8))::UBIGINT::INTEGER AS ${c}`];
  if (b <= 56) return [`('0x' || substr(${w}, 49, 16))::UBIGINT::BIGINT AS ${c}`];
  if (b === 64) return [`('0x' || substr(${w}, 49, 16))::UBIGINT AS ${c}`];
  const big = `${literal(BIG_MARK)} || ${w}`;
  // The word's value where it fits 128 bits (NULL where not), computed once per row by decodePrelude.
  const u = u128Alias(column);
  if (text) return [`CASE WHEN ${u} IS NOT NULL THEN ${u}::VARCHAR ELSE ${big} END AS ${c}`];
  return [
    `CASE WHEN ${u} < ${LIMIT38} THEN CAST(${u} AS DECIMAL(38,0)) END AS ${c}`,
    `CASE WHEN ${u} IS NULL THEN ${big} WHEN ${u} >= ${LIMIT38} THEN ${u}::VARCHAR END AS ${ident(`${column}_raw`)}`,
  ];
}

const u128Alias = (column: string): string => ident(`__u128_${column}`);

/**
 * SELECT items computing, once per row, the 128-bit value of each wide uint parameter (NULL where the word
 * does not fit 128 bits), which decodeItems reads several times: parsing the hex twice per use cost the
 * decode a third of its time.
 */
export function decodePrelude(s: EventSource): string[] {
  const ws = words(s);
  return s.event.inputs.flatMap((p, i) =>
    p.type.startsWith('uint') && bits(p.type) > 64 ? [`CASE WHEN ${fits128(ws[i]!)} THEN ${u128(ws[i]!)} END AS ${u128Alias(s.targets[i]!.column)}`] : [],
  );
}

/** Number of topics a log of the event has. */
export const topicCount = (s: EventSource): number => (s.topic0 === null ? 0 : 1) + s.event.inputs.filter((p) => (p as { indexed?: boolean }).indexed).length;

/** The SQL CASE giving why a candidate log does not fit the event, NULL when it does. */
export function reasonSql(s: EventSource, sig: string): string {
  const nTopics = topicCount(s);
  const nData = s.event.inputs.filter((p) => !(p as { indexed?: boolean }).indexed).length;
  const ws = words(s);
  const checks = s.event.inputs
    .map((p, i) => [validity(p, ws[i]!), `${p.name || `parameter ${i}`}: not a clean ${p.type} word (high bits set)`] as const)
    .filter(([v]) => v !== undefined);
  return `CASE
    WHEN __topics <> ${nTopics} THEN ${literal(`${sig}: `)} || __topics || ${literal(` topics, ${nTopics} expected`)}
    WHEN length(coalesce(data, '0x')) <> ${2 + 64 * nData} THEN ${literal(`${sig}: `)} || ((length(coalesce(data, '0x')) - 2) // 2) || ${literal(` bytes of data, ${32 * nData} expected`)}
    ${checks.map(([v, why]) => `WHEN NOT (${v}) THEN ${literal(`${sig}: ${why}`)}`).join('\n    ')}
  END`;
}

/** SELECT items decoding the event's parameters from a candidate log that fits it. */
export function decodeItems(s: EventSource): string[] {
  const ws = words(s);
  return s.event.inputs.flatMap((p, i) => valueItems(p, ws[i]!, s.targets[i]!.column, s.targets[i]!.text === true));
}
