// Why src/evm/keccak.ts keeps Keccak-f[1600] unrolled: the same permutation as a loop over rounds of named steps
// (theta, rho and pi, chi, iota over lane arrays), timed against it on the same states.
// Run: npm run build --silent && npx tsc -p bench/tsconfig.json && node dist/bench-build/bench/micro/keccak-rounds.js [permutations] [pairs]

import { keccakF } from '../../src/evm/keccak.js';

const RC_HI = [
  0x00000000, 0x00000000, 0x80000000, 0x80000000, 0x00000000, 0x00000000, 0x80000000, 0x80000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000,
  0x80000000, 0x80000000, 0x80000000, 0x80000000, 0x80000000, 0x00000000, 0x80000000, 0x80000000, 0x80000000, 0x00000000, 0x80000000,
];
const RC_LO = [
  0x00000001, 0x00008082, 0x0000808a, 0x80008000, 0x0000808b, 0x80000001, 0x80008081, 0x00008009, 0x0000008a, 0x00000088, 0x80008009, 0x8000000a, 0x8000808b,
  0x0000008b, 0x00008089, 0x00008003, 0x00008002, 0x00000080, 0x0000800a, 0x8000000a, 0x80008081, 0x00008080, 0x80000001, 0x80008008,
];
/** Rho's rotation of lane x + 5y. */
const RHO = [0, 1, 62, 28, 27, 36, 44, 6, 55, 20, 3, 10, 43, 25, 39, 41, 45, 15, 21, 8, 18, 2, 61, 56, 14];
/** Pi's destination of lane x + 5y: lane y + 5((2x + 3y) mod 5). */
const PI = RHO.map((_, i) => Math.floor(i / 5) + 5 * ((2 * (i % 5) + 3 * Math.floor(i / 5)) % 5));

const cLo = new Uint32Array(5),
  cHi = new Uint32Array(5),
  bLo = new Uint32Array(25),
  bHi = new Uint32Array(25);

function theta(lo: Uint32Array, hi: Uint32Array): void {
  for (let x = 0; x < 5; x++) {
    cLo[x] = lo[x]! ^ lo[x + 5]! ^ lo[x + 10]! ^ lo[x + 15]! ^ lo[x + 20]!;
    cHi[x] = hi[x]! ^ hi[x + 5]! ^ hi[x + 10]! ^ hi[x + 15]! ^ hi[x + 20]!;
  }
  for (let x = 0; x < 5; x++) {
    const l = cLo[(x + 1) % 5]!,
      h = cHi[(x + 1) % 5]!;
    const dl = cLo[(x + 4) % 5]! ^ ((l << 1) | (h >>> 31)),
      dh = cHi[(x + 4) % 5]! ^ ((h << 1) | (l >>> 31));
    for (let y = 0; y < 25; y += 5) {
      lo[x + y] = lo[x + y]! ^ dl;
      hi[x + y] = hi[x + y]! ^ dh;
    }
  }
}

function rhoPi(lo: Uint32Array, hi: Uint32Array): void {
  for (let i = 0; i < 25; i++) {
    const l = lo[i]!,
      h = hi[i]!,
      r = RHO[i]!,
      j = PI[i]!;
    if (r === 0) {
      bLo[j] = l;
      bHi[j] = h;
    } else if (r < 32) {
      bLo[j] = (l << r) | (h >>> (32 - r));
      bHi[j] = (h << r) | (l >>> (32 - r));
    } else if (r === 32) {
      bLo[j] = h;
      bHi[j] = l;
    } else {
      bLo[j] = (h << (r - 32)) | (l >>> (64 - r));
      bHi[j] = (l << (r - 32)) | (h >>> (64 - r));
    }
  }
}

function chi(lo: Uint32Array, hi: Uint32Array): void {
  for (let y = 0; y < 25; y += 5) {
    for (let x = 0; x < 5; x++) {
      const a = y + ((x + 1) % 5),
        b = y + ((x + 2) % 5);
      lo[y + x] = bLo[y + x]! ^ (~bLo[a]! & bLo[b]!);
      hi[y + x] = bHi[y + x]! ^ (~bHi[a]! & bHi[b]!);
    }
  }
}

function iota(lo: Uint32Array, hi: Uint32Array, round: number): void {
  lo[0] = lo[0]! ^ RC_LO[round]!;
  hi[0] = hi[0]! ^ RC_HI[round]!;
}

export function keccakFRounds(lo: Uint32Array, hi: Uint32Array): void {
  for (let round = 0; round < 24; round++) {
    theta(lo, hi);
    rhoPi(lo, hi);
    chi(lo, hi);
    iota(lo, hi, round);
  }
}

/** CPU milliseconds of `n` chained permutations of one state (each starts from the last one's output). */
function time(f: (lo: Uint32Array, hi: Uint32Array) => void, n: number): { ms: number; check: number } {
  const lo = new Uint32Array(25).map((_, i) => i * 0x9e3779b9),
    hi = new Uint32Array(25).map((_, i) => i * 0x85ebca6b);
  const t0 = process.cpuUsage();
  for (let i = 0; i < n; i++) f(lo, hi);
  const t = process.cpuUsage(t0);
  return { ms: (t.user + t.system) / 1000, check: lo[0]! ^ hi[24]! };
}

const n = Number(process.argv[2] ?? 200_000);
const pairs = Number(process.argv[3] ?? 3);
// Warm both up (and check that they are the same permutation) before timing.
if (time(keccakF, 1000).check !== time(keccakFRounds, 1000).check) throw new Error('keccakFRounds is not Keccak-f[1600]');
for (let p = 1; p <= pairs; p++) {
  const unrolled = time(keccakF, n),
    rounds = time(keccakFRounds, n);
  process.stdout.write(
    `pair ${p}: ${n} permutations: unrolled ${unrolled.ms.toFixed(0)} ms CPU, rounds of named steps ${rounds.ms.toFixed(0)} ms CPU (${(rounds.ms / unrolled.ms).toFixed(2)} x)\n`,
  );
}
