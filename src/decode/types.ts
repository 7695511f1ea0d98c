// ABI types -> lake columns. One rule per Solidity type, used by every decoded dataset:
//
// | ABI type                         | DuckDB type                   | value                                      |
// |----------------------------------|-------------------------------|--------------------------------------------|
// | intN (N <= 32), uintN (N <= 24)  | INTEGER                       | exact                                      |
// | intN (N <= 64), uintN (N <= 56)  | BIGINT                        | exact                                      |
// | uint64                           | UBIGINT                       | exact                                      |
// | wider ints (uint256, int256, …)  | DECIMAL(38,0) + `<name>_raw`  | NULL plus exact text when |v| >= 10^38     |
// | address                          | VARCHAR                       | 0x + 40 hex, lower-case                    |
// | bool                             | BOOLEAN                       |                                            |
// | bytesN, bytes                    | VARCHAR                       | 0x + hex, lower-case                       |
// | string                           | VARCHAR                       | the UTF-8 text                             |
// | T[], T[k]                        | <T>[]                         | a list                                     |
// | tuple                            | STRUCT(<component> <type>, …) | a struct (unnamed components: f0, f1, …)   |
// | indexed string/bytes/array/tuple | VARCHAR `<name>_hash`         | the topic: keccak256 of the value           |
//
// Inside lists and structs a wide integer is DECIMAL(38,0) too; when one of them does not fit, it is NULL
// there and `<name>_raw` holds the whole value as JSON with every wide integer as exact decimal text.

import type { AbiParameter } from 'viem';
import { ChainlakeError } from '../errors.js';

/** A value that does not decode as its ABI type says. */
export class DecodeValueError extends ChainlakeError {
  constructor(message: string) {
    super(message, { code: 'CHAINLAKE_DECODE_VALUE' });
  }
}

const intBits = (t: string): { signed: boolean; bits: number } | undefined => {
  const m = /^(u?)int(\d*)$/.exec(t);
  if (!m) return undefined;
  return { signed: m[1] === '', bits: m[2] ? Number(m[2]) : 256 };
};

/** True for the integer types stored as DECIMAL(38,0) with exact text beside. */
export function isWideInt(t: string): boolean {
  const i = intBits(t);
  return i !== undefined && (i.signed ? i.bits > 64 : i.bits > 64);
}

const components = (p: AbiParameter): readonly AbiParameter[] => ('components' in p ? (p.components as readonly AbiParameter[]) : []);

/** The element parameter of an array type (`uint256[2][]` -> `uint256[2]`). */
export function elementOf(p: AbiParameter): AbiParameter {
  return { ...p, type: p.type.slice(0, p.type.lastIndexOf('[')) } as AbiParameter;
}
export const isArray = (p: AbiParameter): boolean => p.type.endsWith(']');
export const isTuple = (p: AbiParameter): boolean => p.type === 'tuple';

/** Whether any value of the type is dynamic (hashed when indexed). */
export function isDynamicOrComposite(p: AbiParameter): boolean {
  return p.type === 'string' || p.type === 'bytes' || isArray(p) || isTuple(p);
}

/** Whether a wide integer occurs in the type (then a `_raw` companion column exists). */
export function hasWide(p: AbiParameter): boolean {
  if (isArray(p)) return hasWide(elementOf(p));
  if (isTuple(p)) return components(p).some(hasWide);
  return isWideInt(p.type);
}

export const fieldName = (name: string | undefined, i: number, prefix: string): string => {
  const n = (name ?? '')
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .replace(/[^A-Za-z0-9_]/g, '_')
    .toLowerCase();
  return n === '' ? `${prefix}${i}` : n;
};

const quoteField = (n: string): string => `"${n.replace(/"/g, '""')}"`;

/** The DuckDB type of a parameter (`staged`: the type the staged JSON is read as, wide and 64-bit ints as text). */
export function duckType(p: AbiParameter, staged = false): string {
  if (isArray(p)) return `${duckType(elementOf(p), staged)}[]`;
  if (isTuple(p))
    return `STRUCT(${components(p)
      .map((c, i) => `${quoteField(fieldName(c.name, i, 'f'))} ${duckType(c, staged)}`)
      .join(', ')})`;
  const i = intBits(p.type);
  if (i) {
    if (i.signed ? i.bits <= 32 : i.bits <= 24) return 'INTEGER';
    if (staged) return 'VARCHAR';
    if (i.signed ? i.bits <= 64 : i.bits <= 56) return 'BIGINT';
    if (!i.signed && i.bits === 64) return 'UBIGINT';
    return 'DECIMAL(38,0)';
  }
  if (p.type === 'bool') return 'BOOLEAN';
  if (p.type === 'address' || p.type === 'string' || p.type === 'bytes' || /^bytes\d+$/.test(p.type)) return 'VARCHAR';
  throw new DecodeValueError(`unsupported ABI type ${p.type}`);
}

const LIMIT38 = 10n ** 38n;

/**
 * A decoded value (as viem gives it) to its staged JSON form, checked against its declared type: integers in
 * range, addresses and bytes lower-case hex. `wide.overflow` is set when a wide integer does not fit
 * DECIMAL(38,0) (it is then null here; the raw JSON keeps it); `exact` keeps every wide integer as text.
 */
export function stageValue(p: AbiParameter, v: unknown, wide: { overflow: boolean }, exact = false): unknown {
  if (isArray(p)) {
    if (!Array.isArray(v)) throw new DecodeValueError(`${p.type}: not a list`);
    const el = elementOf(p);
    return v.map((x) => stageValue(el, x, wide, exact));
  }
  if (isTuple(p)) {
    const cs = components(p);
    const out: Record<string, unknown> = {};
    cs.forEach((c, i) => {
      const x = Array.isArray(v) ? v[i] : (v as Record<string, unknown>)[c.name ?? ''];
      out[fieldName(c.name, i, 'f')] = stageValue(c, x, wide, exact);
    });
    return out;
  }
  const i = intBits(p.type);
  if (i) {
    const n = typeof v === 'bigint' ? v : BigInt(v as number);
    const lo = i.signed ? -(1n << BigInt(i.bits - 1)) : 0n;
    const hi = i.signed ? (1n << BigInt(i.bits - 1)) - 1n : (1n << BigInt(i.bits)) - 1n;
    if (n < lo || n > hi) throw new DecodeValueError(`${n} is out of range for ${p.type}`);
    if (i.signed ? i.bits <= 32 : i.bits <= 24) return Number(n);
    if (!isWideInt(p.type)) return n.toString();
    if (!exact && (n >= LIMIT38 || n <= -LIMIT38)) {
      wide.overflow = true;
      return null;
    }
    return n.toString();
  }
  if (p.type === 'bool') {
    if (typeof v !== 'boolean') throw new DecodeValueError('bool: not a boolean');
    return v;
  }
  if (p.type === 'string') return v as string;
  return (v as string).toLowerCase(); // address, bytes, bytesN: viem gives 0x hex
}

/** The `_raw` companion of a value: its staged form as JSON, every wide integer as exact decimal text. */
export function exactJson(p: AbiParameter, v: unknown): string {
  return JSON.stringify(stageValue(p, v, { overflow: false }, true));
}
