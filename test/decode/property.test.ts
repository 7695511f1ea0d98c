// Property: any value viem (the reference encoder) encodes into a log, chainlake decodes to the same value,
// per ABI type: through DuckDB (address, bool, uintN, bytesN) or JavaScript (the rest), in the lake's column
// types (read back with wide and 64-bit integers as text, so the comparison is exact).
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { encodeAbiParameters, keccak256, toEventSelector, type AbiEvent, type AbiParameter } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventDataset } from '../../src/decode/datasets.js';
import { decodeLogs } from '../../src/decode/decode.js';
import { openEngine, type Engine } from '../../src/load/engine.js';
import { binaryUnit } from '../helpers/arbitraries.js';

let engine: Engine;
let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), 'chainlake-prop-'));
  engine = await openEngine({ tempDir: tmp });
});
afterAll(async () => {
  engine?.close();
  await rm(tmp, { recursive: true, force: true });
});

const CONTRACT = '0x' + 'ab'.repeat(20);
const hex = (n: number): fc.Arbitrary<`0x${string}`> =>
  fc.uint8Array({ minLength: n, maxLength: n }).map((b) => `0x${Buffer.from(b).toString('hex')}` as `0x${string}`);
const address = hex(20);
const int = (signed: boolean, bits: number): fc.Arbitrary<bigint> => {
  const min = signed ? -(1n << BigInt(bits - 1)) : 0n;
  const max = signed ? (1n << BigInt(bits - 1)) - 1n : (1n << BigInt(bits)) - 1n;
  return fc.oneof(
    fc.bigInt({ min, max }),
    fc.constantFrom(min, max, 0n, ...(bits > 128 ? [10n ** 38n - 1n, 10n ** 38n, -(10n ** 38n)].filter((v) => v >= min && v <= max) : [])),
  );
};
const small = (a: fc.Arbitrary<bigint>): fc.Arbitrary<number> => a.map(Number);

interface Case {
  type: string;
  components?: AbiParameter[];
  arb: fc.Arbitrary<unknown>;
  indexable?: boolean;
}
const CASES: Case[] = [
  { type: 'uint8', arb: small(int(false, 8)), indexable: true },
  { type: 'uint24', arb: small(int(false, 24)), indexable: true },
  { type: 'uint32', arb: int(false, 32), indexable: true },
  { type: 'uint64', arb: int(false, 64), indexable: true },
  { type: 'uint128', arb: int(false, 128), indexable: true },
  { type: 'uint256', arb: int(false, 256), indexable: true },
  { type: 'int8', arb: small(int(true, 8)), indexable: true },
  { type: 'int32', arb: small(int(true, 32)), indexable: true },
  { type: 'int64', arb: int(true, 64), indexable: true },
  { type: 'int256', arb: int(true, 256), indexable: true },
  { type: 'address', arb: address, indexable: true },
  { type: 'bool', arb: fc.boolean(), indexable: true },
  { type: 'bytes1', arb: hex(1), indexable: true },
  { type: 'bytes20', arb: hex(20), indexable: true },
  { type: 'bytes32', arb: hex(32), indexable: true },
  { type: 'bytes', arb: fc.uint8Array({ maxLength: 80 }).map((b) => `0x${Buffer.from(b).toString('hex')}`), indexable: true },
  { type: 'string', arb: fc.string({ unit: binaryUnit, maxLength: 40 }), indexable: true },
  { type: 'uint256[]', arb: fc.array(int(false, 256), { maxLength: 5 }) },
  { type: 'address[]', arb: fc.array(address, { maxLength: 4 }) },
  { type: 'int8[3]', arb: fc.array(small(int(true, 8)), { minLength: 3, maxLength: 3 }) },
  { type: 'string[]', arb: fc.array(fc.string({ maxLength: 12 }), { maxLength: 4 }) },
  {
    type: 'tuple',
    components: [
      { name: 'maker', type: 'address' },
      { name: 'amount', type: 'uint128' },
      { name: 'big', type: 'int256' },
      { name: 'filled', type: 'bool' },
    ],
    arb: fc.record({ maker: address, amount: int(false, 128), big: int(true, 256), filled: fc.boolean() }),
  },
  {
    type: 'tuple[]',
    components: [
      { name: 'leg', type: 'uint16' },
      { name: 'venue', type: 'string' },
      { name: 'size', type: 'uint256' },
    ],
    arb: fc.array(fc.record({ leg: small(int(false, 16)), venue: fc.string({ maxLength: 10 }), size: int(false, 256) }), { maxLength: 3 }),
  },
];

const fits = (v: bigint): boolean => v < 10n ** 38n && v > -(10n ** 38n);
const isSmall = (t: string): boolean => /^int([89]|[12]\d|3[0-2])$/.test(t) || /^uint([89]|1\d|2[0-4])$/.test(t);
/** The value as expected in JSON once wide and 64-bit ints are read as text (written without src/decode). */
function expected(type: string, v: unknown, comps?: readonly AbiParameter[], exact = false): unknown {
  if (type.endsWith(']')) return (v as unknown[]).map((x) => expected(type.slice(0, type.lastIndexOf('[')), x, comps, exact));
  if (type === 'tuple')
    return Object.fromEntries(
      comps!.map((c) => [c.name, expected(c.type, (v as Record<string, unknown>)[c.name!], (c as { components?: AbiParameter[] }).components, exact)]),
    );
  if (/^u?int/.test(type)) {
    const n = BigInt(v as bigint);
    if (isSmall(type)) return Number(n);
    if (/^u?int(\d+)$/.exec(type) && Number(/\d+/.exec(type)![0]) <= 64) return n.toString();
    return fits(n) || exact ? n.toString() : null;
  }
  if (type === 'address' || type.startsWith('bytes')) return (v as string).toLowerCase();
  return v;
}
const anyWideOverflow = (type: string, v: unknown, comps?: readonly AbiParameter[]): boolean => {
  if (type.endsWith(']')) return (v as unknown[]).some((x) => anyWideOverflow(type.slice(0, type.lastIndexOf('[')), x, comps));
  if (type === 'tuple')
    return comps!.some((c) => anyWideOverflow(c.type, (v as Record<string, unknown>)[c.name!], (c as { components?: AbiParameter[] }).components));
  return /^u?int/.test(type) && Number(/\d+/.exec(type)?.[0] ?? 256) > 64 && !fits(BigInt(v as bigint));
};
const stagedType = (type: string, comps?: readonly AbiParameter[]): string => {
  if (type.endsWith(']')) return `${stagedType(type.slice(0, type.lastIndexOf('[')), comps)}[]`;
  if (type === 'tuple')
    return `STRUCT(${comps!.map((c) => `"${c.name}" ${stagedType(c.type, (c as { components?: AbiParameter[] }).components)}`).join(', ')})`;
  if (/^u?int/.test(type)) return isSmall(type) ? 'INTEGER' : 'VARCHAR';
  return type === 'bool' ? 'BOOLEAN' : 'VARCHAR';
};
const lit = (s: string | null): string => (s === null ? 'NULL' : `'${s.replace(/'/g, "''")}'`);

let runs = 0;
async function roundTrip(c: Case, indexed: boolean, values: unknown[]): Promise<void> {
  const param = { name: 'x', type: c.type, indexed, ...(c.components ? { components: c.components } : {}) } as AbiParameter;
  const event = { type: 'event', name: 'E', anonymous: false, inputs: [param, { name: 'tag', type: 'uint16', indexed: false }] } as AbiEvent;
  const dynamic = c.type === 'string' || c.type === 'bytes';
  const logs = values.map((v, i) => {
    const topic1 = indexed
      ? dynamic
        ? keccak256(c.type === 'string' ? (`0x${Buffer.from(v as string, 'utf8').toString('hex')}` as `0x${string}`) : (v as `0x${string}`))
        : encodeAbiParameters([param], [v] as never)
      : null;
    const data = indexed ? encodeAbiParameters([{ type: 'uint16' }], [i]) : encodeAbiParameters([param, { type: 'uint16' }], [v, i] as never);
    return `(${lit(CONTRACT)}, TIMESTAMPTZ '2024-03-01 00:00:00+00', ${lit('0x' + i.toString(16).padStart(64, '0'))}, 0, ${i}, ${lit(toEventSelector(event))}, ${lit(topic1)}, NULL, NULL, ${lit(data)})`;
  });
  const table = `logs_${runs++}`;
  await engine.conn.run(
    `CREATE TEMP TABLE ${table} (address VARCHAR, "timestamp" TIMESTAMPTZ, transaction_hash VARCHAR, transaction_index BIGINT, log_index BIGINT, topic_0 VARCHAR, topic_1 VARCHAR, topic_2 VARCHAR, topic_3 VARCHAR, data VARCHAR); INSERT INTO ${table} VALUES ${logs.join(', ')}`,
  );
  const d = eventDataset('prop', [CONTRACT], event, 'property test');
  const out = await decodeLogs({
    conn: engine.conn,
    logs: `SELECT * FROM ${table}`,
    datasets: [d],
    runId: 'prop',
    ingestedAt: '2024-03-01T00:00:00Z',
    workDir: path.join(tmp, table),
  });
  expect(out.rejectCount).toBe(0);
  const t = out.tables.get(d.name)!;
  const col = indexed && dynamic ? 'x_hash' : 'x';
  const hasRaw = !(indexed && dynamic) && /u?int(\d+)/.test(JSON.stringify([c.type, c.components])) && d.columns.some((k) => k.name === 'x_raw');
  const rows = (
    await engine.conn.runAndReadAll(
      `SELECT tag, to_json(CAST(${col} AS ${indexed && dynamic ? 'VARCHAR' : stagedType(c.type, c.components)}))::VARCHAR, ${hasRaw ? 'x_raw' : 'NULL'} FROM ${t} ORDER BY tag`,
    )
  ).getRowsJS() as [number, string, string | null][];
  expect(rows.length).toBe(values.length);
  rows.forEach(([tag, json, raw]) => {
    const v = values[tag]!;
    if (indexed && dynamic) {
      expect(JSON.parse(json)).toBe(logs[tag]!.split(', ')[6]!.slice(1, -1));
      return;
    }
    expect(JSON.parse(json), `${c.type} ${JSON.stringify(v, (_, x: unknown) => (typeof x === 'bigint' ? x.toString() : x))}`).toEqual(
      expected(c.type, v, c.components),
    );
    if (hasRaw) {
      const over = anyWideOverflow(c.type, v, c.components);
      if (!over) expect(raw).toBeNull();
      else if (!c.type.endsWith(']') && c.type !== 'tuple') expect(raw).toBe(String(v));
      else expect(JSON.parse(raw!)).toEqual(expected(c.type, v, c.components, true));
    }
  });
  await engine.conn.run(`DROP TABLE ${table}; DROP TABLE ${t}`);
}

describe('any value viem encodes, chainlake decodes to the same value', () => {
  for (const c of CASES) {
    it(`${c.type === 'tuple' || c.type === 'tuple[]' ? `${c.type} (${c.components!.map((x) => x.type).join(', ')})` : c.type}${c.indexable ? ', as data and as an indexed topic' : ''}`, async () => {
      await fc.assert(
        fc.asyncProperty(fc.array(c.arb, { minLength: 1, maxLength: 30 }), (values) => roundTrip(c, false, values)),
        { numRuns: 4 },
      );
      if (c.indexable)
        await fc.assert(
          fc.asyncProperty(fc.array(c.arb, { minLength: 1, maxLength: 30 }), (values) => roundTrip(c, true, values)),
          { numRuns: 3 },
        );
    });
  }
});
