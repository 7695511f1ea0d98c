import { describe, expect, it } from 'vitest';
import { expectBe, expectEqual } from './checks.js';

describe('cheap checks', () => {
  it("expectBe fails where toBe fails, with expect's message, and only then makes the message", () => {
    expectBe(NaN, NaN);
    expectBe('a', 'a', () => {
      throw new Error('made the message of a check that holds');
    });
    expect(() => expectBe(0, -0)).toThrow();
    expect(() => expectBe({}, {})).toThrow();
    expect(() => expectBe('a', 'b', () => 'the entry')).toThrow(/the entry/);
  });

  it('expectEqual fails where toEqual fails, and passes where toEqual passes though isDeepStrictEqual does not', () => {
    expectEqual({ a: [1, { b: 'x' }] }, { a: [1, { b: 'x' }] });
    // An undefined property and a missing one: toEqual's verdict, not isDeepStrictEqual's.
    expectEqual<Record<string, unknown>>({ a: 1, b: undefined }, { a: 1 });
    expect(() => expectEqual({ a: [1, 2] }, { a: [1, 3] }, 'the field')).toThrow(/the field/);
    expect(() => expectEqual<unknown>('1', 1)).toThrow();
  });
});
