import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ColumnKind } from '../../src/datasets/column.js';
import { Rejected, fitsDecimal38, type Converter } from '../../src/transform/convert.js';
import { KINDS } from '../../src/transform/kinds.js';

const CONVERTERS = Object.fromEntries(Object.entries(KINDS).map(([k, spec]) => [k, spec.convert])) as Record<ColumnKind, Converter>;

const UINT256_MAX = 2n ** 256n - 1n;

describe('amount converter', () => {
  it('round-trips any uint256 decimal string exactly', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: UINT256_MAX }), (n) => {
        const out = CONVERTERS.amount(n.toString());
        expect(out).toBe(n.toString());
        expect(fitsDecimal38(out as string)).toBe(n < 10n ** 38n);
      }),
    );
  });

  it('rejects negative, fractional, hex and non-string values with a reason', () => {
    for (const bad of ['-1', '1.5', '0x10', '', ' 1', '1e3', {}, [], true, -3, 1.5]) {
      const out = CONVERTERS.amount(bad);
      expect(out, JSON.stringify(bad)).toBeInstanceOf(Rejected);
      expect((out as Rejected).reason).toMatch(/amount/);
    }
  });

  it('strips leading zeros so the digit count is the magnitude', () => {
    expect(CONVERTERS.amount('000123')).toBe('123');
    expect(CONVERTERS.amount('0000')).toBe('0');
  });
});

describe('bigint converter', () => {
  it('accepts every int64 and rejects just outside', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }), (n) => {
        expect(CONVERTERS.bigint(n.toString())).toBe(n.toString());
      }),
    );
    expect(CONVERTERS.bigint('9223372036854775808')).toBeInstanceOf(Rejected);
    expect(CONVERTERS.bigint('-9223372036854775809')).toBeInstanceOf(Rejected);
    expect((CONVERTERS.bigint('99999999999999999999') as Rejected).reason).toMatch(/BIGINT range/);
  });

  it('accepts safe JSON integers (a slip of a real API) but never fractions', () => {
    expect(CONVERTERS.bigint(42)).toBe('42');
    expect(CONVERTERS.bigint(4.2)).toBeInstanceOf(Rejected);
    expect(CONVERTERS.bigint('12a')).toBeInstanceOf(Rejected);
  });
});

describe('timestamp converter', () => {
  it('round-trips any second-precision ISO timestamp', () => {
    fc.assert(
      fc.property(fc.date({ min: new Date('1970-01-01T00:00:00Z'), max: new Date('9999-12-31T23:59:59Z'), noInvalidDate: true }), (d) => {
        const iso = new Date(Math.floor(d.getTime() / 1000) * 1000).toISOString().replace('.000Z', 'Z');
        expect(CONVERTERS.timestamp(iso)).toBe(iso);
      }),
    );
  });

  it('normalises offsets to UTC and epoch milliseconds to ISO', () => {
    expect(CONVERTERS.timestamp('2024-03-01T01:30:00+02:00')).toBe('2024-02-29T23:30:00Z');
    expect(CONVERTERS.timestamp(1_700_000_000_000)).toBe('2023-11-14T22:13:20.000Z');
  });

  it('rejects impossible dates and malformed text instead of guessing', () => {
    for (const bad of [
      '2024-02-30T00:00:00Z',
      '2024-13-01T00:00:00Z',
      '2024-01-01T24:00:00Z',
      '2024-01-01',
      'yesterday',
      1_700_000_000,
      null === null ? {} : 0,
    ]) {
      expect(CONVERTERS.timestamp(bad), JSON.stringify(bad)).toBeInstanceOf(Rejected);
    }
  });
});

describe('malformed input never throws and never becomes a silent NULL', () => {
  it('holds for every converter on arbitrary JSON', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        for (const [kind, convert] of Object.entries(CONVERTERS)) {
          const out = convert(v);
          expect(out === null || out === undefined, `${kind} on ${JSON.stringify(v)}`).toBe(false);
        }
      }),
    );
  });
});

describe('address, hash and flag converters', () => {
  it('lower-cases valid addresses and hashes and refuses wrong lengths', () => {
    expect(CONVERTERS.address('0xABCDEF0123456789ABCDEF0123456789ABCDEF01')).toBe('0xabcdef0123456789abcdef0123456789abcdef01');
    expect(CONVERTERS.address('0xABCDEF')).toBeInstanceOf(Rejected);
    expect(CONVERTERS.hash(`0x${'A'.repeat(64)}`)).toBe(`0x${'a'.repeat(64)}`);
    expect(CONVERTERS.hash(`0x${'a'.repeat(63)}`)).toBeInstanceOf(Rejected);
  });

  it('reads 0/1 flags and JSON booleans, nothing else', () => {
    expect(CONVERTERS.bool('1')).toBe(true);
    expect(CONVERTERS.bool('0')).toBe(false);
    expect(CONVERTERS.bool(true)).toBe(true);
    expect(CONVERTERS.bool('2')).toBeInstanceOf(Rejected);
    expect(CONVERTERS.bool('true')).toBeInstanceOf(Rejected);
  });
});
