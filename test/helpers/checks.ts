import { isDeepStrictEqual } from 'node:util';
import { expect } from 'vitest';

/**
 * Checks for loops that run them many thousands of times (a property's runs, every field of every entry): the
 * verdict and the failure are expect's own, but an assertion is built only when the cheap comparison fails. Building
 * one costs about 7 microseconds, which at a few hundred thousand checks was most of a property test's time.
 * `message` may be a function, so that the text of a check that holds is never made either.
 */
type Message = string | (() => string);
const text = (m: Message | undefined): string | undefined => (typeof m === 'function' ? m() : m);

/** expect(actual, message).toBe(expected). */
export function expectBe<T>(actual: T, expected: T, message?: Message): void {
  if (!Object.is(actual, expected)) expect(actual, text(message)).toBe(expected);
}

/**
 * expect(actual, message).toEqual(expected). isDeepStrictEqual is the stricter of the two (it tells apart an
 * undefined property from a missing one, and prototypes): where it says equal, toEqual does too, and elsewhere
 * toEqual decides.
 */
export function expectEqual<T>(actual: T, expected: T, message?: Message): void {
  if (!isDeepStrictEqual(actual, expected)) expect(actual, text(message)).toEqual(expected);
}
