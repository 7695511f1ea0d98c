// Deterministic integer hashing and a seeded PRNG. Never Math.random: every byte the simulator serves is a
// pure function of (seed, scale, network, request).

/** murmur3 fmix32: a bijection on uint32, so ids hidden in hashes can be recovered with unmix32. */
export function mix32(x: number): number {
  x ^= x >>> 16;
  x = Math.imul(x, 0x85ebca6b);
  x ^= x >>> 13;
  x = Math.imul(x, 0xc2b2ae35);
  x ^= x >>> 16;
  return x >>> 0;
}

function modInverse32(c: number): number {
  let inv = c;
  for (let i = 0; i < 5; i++) inv = Math.imul(inv, (2 - Math.imul(c, inv)) | 0);
  return inv;
}
const INV1 = modInverse32(0x85ebca6b);
const INV2 = modInverse32(0xc2b2ae35);

export function unmix32(y: number): number {
  y ^= y >>> 16;
  y = Math.imul(y, INV2);
  y ^= (y >>> 13) ^ (y >>> 26);
  y = Math.imul(y, INV1);
  y ^= y >>> 16;
  return y >>> 0;
}

export function hash2(a: number, b: number): number {
  return mix32((mix32((a + 0x9e3779b9) >>> 0) ^ Math.imul(b, 0x27d4eb2f)) >>> 0);
}

export function hash3(a: number, b: number, c: number): number {
  return mix32((hash2(a, b) + Math.imul(c, 0x165667b1) + 0x7f4a7c15) >>> 0);
}

/** Uniform float in [0,1) from a uint32 hash. */
export function unit(h: number): number {
  return h / 4294967296;
}

/** splitmix32: small, fast, good enough for synthetic data. */
export class Rng {
  private s: number;
  constructor(seed: number) {
    this.s = mix32((seed ^ 0x5bd1e995) >>> 0) | 0;
  }
  next(): number {
    this.s = (this.s + 0x9e3779b9) | 0;
    let z = this.s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    return (z ^ (z >>> 16)) >>> 0;
  }
  float(): number {
    return this.next() / 4294967296;
  }
  int(n: number): number {
    return Math.floor(this.float() * n);
  }
}

/** Stable 32-bit hash of a string (FNV-1a then mixed), for salts and seeds derived from names. */
export function hashString(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return mix32(h >>> 0);
}
