import fc from 'fast-check';

/** The code points fast-check's `binary` unit draws from: all but the surrogates, numbered without a gap. */
const SURROGATES = 0xd800;
const GAP = 0xe000 - SURROGATES;
const CODE_POINTS = 0x110000 - GAP;

/**
 * fast-check's `unit: 'binary'` (any code point but a lone surrogate) as the same draw from the same integers:
 * with one seed it gives the same strings, shrinks them the same way and biases towards the same dangerous strings
 * ("__proto__", ...). What differs is the way back from a string to its draw: fast-check builds a map of all
 * 1,112,064 code points the first time a process needs it (a cost per test fork: docs/performance.md, "The test
 * suite"), this computes it.
 */
export const binaryUnit: fc.Arbitrary<string> = fc.nat(CODE_POINTS - 1).map(
  (i) => String.fromCodePoint(i < SURROGATES ? i : i + GAP),
  (s) => {
    const cp = typeof s === 'string' ? s.codePointAt(0) : undefined;
    if (cp === undefined || String.fromCodePoint(cp) !== s || (cp >= SURROGATES && cp < SURROGATES + GAP)) throw new Error('not one code point');
    return cp < SURROGATES ? cp : cp - GAP;
  },
);
