// Keccak-256 (the pre-standard padding Ethereum uses), on 32-bit lane halves. Used for EIP-55 checksum case
// and event/function signature hashes. Small inputs only; EIP-55 has its own allocation-free path.

const RC_HI = new Uint32Array([
  0x00000000, 0x00000000, 0x80000000, 0x80000000, 0x00000000, 0x00000000, 0x80000000, 0x80000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000,
  0x80000000, 0x80000000, 0x80000000, 0x80000000, 0x80000000, 0x00000000, 0x80000000, 0x80000000, 0x80000000, 0x00000000, 0x80000000,
]);
const RC_LO = new Uint32Array([
  0x00000001, 0x00008082, 0x0000808a, 0x80008000, 0x0000808b, 0x80000001, 0x80008081, 0x00008009, 0x0000008a, 0x00000088, 0x80008009, 0x8000000a, 0x8000808b,
  0x0000008b, 0x00008089, 0x00008003, 0x00008002, 0x00000080, 0x0000800a, 0x8000000a, 0x80008081, 0x00008080, 0x80000001, 0x80008008,
]);
/**
 * Keccak-f[1600] on lanes split into (lo, hi) 32-bit halves: 24 rounds of theta, rho, pi, chi and iota, with the
 * first four unrolled over locals, so that every rotation is a constant shift and no lane goes back through an array
 * between steps. It stays one long body, the exception to issue 35's small named steps, because it is hot: the
 * simulator checksums (EIP-55) every address a listing serves through it, and the same permutation as a loop over
 * rounds of named steps costs several times its CPU (bench/micro/keccak-rounds.ts, which imports it; figures in
 * docs/performance.md, "Keccak-256"). test/evm.test.ts checks it against viem's keccak256 on random inputs.
 */
export function keccakF(lo: Uint32Array, hi: Uint32Array): void {
  for (let round = 0; round < 24; round++) {
    const c0l = lo[0]! ^ lo[5]! ^ lo[10]! ^ lo[15]! ^ lo[20]!,
      c0h = hi[0]! ^ hi[5]! ^ hi[10]! ^ hi[15]! ^ hi[20]!;
    const c1l = lo[1]! ^ lo[6]! ^ lo[11]! ^ lo[16]! ^ lo[21]!,
      c1h = hi[1]! ^ hi[6]! ^ hi[11]! ^ hi[16]! ^ hi[21]!;
    const c2l = lo[2]! ^ lo[7]! ^ lo[12]! ^ lo[17]! ^ lo[22]!,
      c2h = hi[2]! ^ hi[7]! ^ hi[12]! ^ hi[17]! ^ hi[22]!;
    const c3l = lo[3]! ^ lo[8]! ^ lo[13]! ^ lo[18]! ^ lo[23]!,
      c3h = hi[3]! ^ hi[8]! ^ hi[13]! ^ hi[18]! ^ hi[23]!;
    const c4l = lo[4]! ^ lo[9]! ^ lo[14]! ^ lo[19]! ^ lo[24]!,
      c4h = hi[4]! ^ hi[9]! ^ hi[14]! ^ hi[19]! ^ hi[24]!;
    const d0l = c4l ^ ((c1l << 1) | (c1h >>> 31)),
      d0h = c4h ^ ((c1h << 1) | (c1l >>> 31));
    const d1l = c0l ^ ((c2l << 1) | (c2h >>> 31)),
      d1h = c0h ^ ((c2h << 1) | (c2l >>> 31));
    const d2l = c1l ^ ((c3l << 1) | (c3h >>> 31)),
      d2h = c1h ^ ((c3h << 1) | (c3l >>> 31));
    const d3l = c2l ^ ((c4l << 1) | (c4h >>> 31)),
      d3h = c2h ^ ((c4h << 1) | (c4l >>> 31));
    const d4l = c3l ^ ((c0l << 1) | (c0h >>> 31)),
      d4h = c3h ^ ((c0h << 1) | (c0l >>> 31));
    const t0l = lo[0]! ^ d0l,
      t0h = hi[0]! ^ d0h;
    const b0l = t0l,
      b0h = t0h;
    const t1l = lo[1]! ^ d1l,
      t1h = hi[1]! ^ d1h;
    const b10l = (t1l << 1) | (t1h >>> 31),
      b10h = (t1h << 1) | (t1l >>> 31);
    const t2l = lo[2]! ^ d2l,
      t2h = hi[2]! ^ d2h;
    const b20l = (t2h << 30) | (t2l >>> 2),
      b20h = (t2l << 30) | (t2h >>> 2);
    const t3l = lo[3]! ^ d3l,
      t3h = hi[3]! ^ d3h;
    const b5l = (t3l << 28) | (t3h >>> 4),
      b5h = (t3h << 28) | (t3l >>> 4);
    const t4l = lo[4]! ^ d4l,
      t4h = hi[4]! ^ d4h;
    const b15l = (t4l << 27) | (t4h >>> 5),
      b15h = (t4h << 27) | (t4l >>> 5);
    const t5l = lo[5]! ^ d0l,
      t5h = hi[5]! ^ d0h;
    const b16l = (t5h << 4) | (t5l >>> 28),
      b16h = (t5l << 4) | (t5h >>> 28);
    const t6l = lo[6]! ^ d1l,
      t6h = hi[6]! ^ d1h;
    const b1l = (t6h << 12) | (t6l >>> 20),
      b1h = (t6l << 12) | (t6h >>> 20);
    const t7l = lo[7]! ^ d2l,
      t7h = hi[7]! ^ d2h;
    const b11l = (t7l << 6) | (t7h >>> 26),
      b11h = (t7h << 6) | (t7l >>> 26);
    const t8l = lo[8]! ^ d3l,
      t8h = hi[8]! ^ d3h;
    const b21l = (t8h << 23) | (t8l >>> 9),
      b21h = (t8l << 23) | (t8h >>> 9);
    const t9l = lo[9]! ^ d4l,
      t9h = hi[9]! ^ d4h;
    const b6l = (t9l << 20) | (t9h >>> 12),
      b6h = (t9h << 20) | (t9l >>> 12);
    const t10l = lo[10]! ^ d0l,
      t10h = hi[10]! ^ d0h;
    const b7l = (t10l << 3) | (t10h >>> 29),
      b7h = (t10h << 3) | (t10l >>> 29);
    const t11l = lo[11]! ^ d1l,
      t11h = hi[11]! ^ d1h;
    const b17l = (t11l << 10) | (t11h >>> 22),
      b17h = (t11h << 10) | (t11l >>> 22);
    const t12l = lo[12]! ^ d2l,
      t12h = hi[12]! ^ d2h;
    const b2l = (t12h << 11) | (t12l >>> 21),
      b2h = (t12l << 11) | (t12h >>> 21);
    const t13l = lo[13]! ^ d3l,
      t13h = hi[13]! ^ d3h;
    const b12l = (t13l << 25) | (t13h >>> 7),
      b12h = (t13h << 25) | (t13l >>> 7);
    const t14l = lo[14]! ^ d4l,
      t14h = hi[14]! ^ d4h;
    const b22l = (t14h << 7) | (t14l >>> 25),
      b22h = (t14l << 7) | (t14h >>> 25);
    const t15l = lo[15]! ^ d0l,
      t15h = hi[15]! ^ d0h;
    const b23l = (t15h << 9) | (t15l >>> 23),
      b23h = (t15l << 9) | (t15h >>> 23);
    const t16l = lo[16]! ^ d1l,
      t16h = hi[16]! ^ d1h;
    const b8l = (t16h << 13) | (t16l >>> 19),
      b8h = (t16l << 13) | (t16h >>> 19);
    const t17l = lo[17]! ^ d2l,
      t17h = hi[17]! ^ d2h;
    const b18l = (t17l << 15) | (t17h >>> 17),
      b18h = (t17h << 15) | (t17l >>> 17);
    const t18l = lo[18]! ^ d3l,
      t18h = hi[18]! ^ d3h;
    const b3l = (t18l << 21) | (t18h >>> 11),
      b3h = (t18h << 21) | (t18l >>> 11);
    const t19l = lo[19]! ^ d4l,
      t19h = hi[19]! ^ d4h;
    const b13l = (t19l << 8) | (t19h >>> 24),
      b13h = (t19h << 8) | (t19l >>> 24);
    const t20l = lo[20]! ^ d0l,
      t20h = hi[20]! ^ d0h;
    const b14l = (t20l << 18) | (t20h >>> 14),
      b14h = (t20h << 18) | (t20l >>> 14);
    const t21l = lo[21]! ^ d1l,
      t21h = hi[21]! ^ d1h;
    const b24l = (t21l << 2) | (t21h >>> 30),
      b24h = (t21h << 2) | (t21l >>> 30);
    const t22l = lo[22]! ^ d2l,
      t22h = hi[22]! ^ d2h;
    const b9l = (t22h << 29) | (t22l >>> 3),
      b9h = (t22l << 29) | (t22h >>> 3);
    const t23l = lo[23]! ^ d3l,
      t23h = hi[23]! ^ d3h;
    const b19l = (t23h << 24) | (t23l >>> 8),
      b19h = (t23l << 24) | (t23h >>> 8);
    const t24l = lo[24]! ^ d4l,
      t24h = hi[24]! ^ d4h;
    const b4l = (t24l << 14) | (t24h >>> 18),
      b4h = (t24h << 14) | (t24l >>> 18);
    lo[0] = b0l ^ (~b1l & b2l);
    hi[0] = b0h ^ (~b1h & b2h);
    lo[1] = b1l ^ (~b2l & b3l);
    hi[1] = b1h ^ (~b2h & b3h);
    lo[2] = b2l ^ (~b3l & b4l);
    hi[2] = b2h ^ (~b3h & b4h);
    lo[3] = b3l ^ (~b4l & b0l);
    hi[3] = b3h ^ (~b4h & b0h);
    lo[4] = b4l ^ (~b0l & b1l);
    hi[4] = b4h ^ (~b0h & b1h);
    lo[5] = b5l ^ (~b6l & b7l);
    hi[5] = b5h ^ (~b6h & b7h);
    lo[6] = b6l ^ (~b7l & b8l);
    hi[6] = b6h ^ (~b7h & b8h);
    lo[7] = b7l ^ (~b8l & b9l);
    hi[7] = b7h ^ (~b8h & b9h);
    lo[8] = b8l ^ (~b9l & b5l);
    hi[8] = b8h ^ (~b9h & b5h);
    lo[9] = b9l ^ (~b5l & b6l);
    hi[9] = b9h ^ (~b5h & b6h);
    lo[10] = b10l ^ (~b11l & b12l);
    hi[10] = b10h ^ (~b11h & b12h);
    lo[11] = b11l ^ (~b12l & b13l);
    hi[11] = b11h ^ (~b12h & b13h);
    lo[12] = b12l ^ (~b13l & b14l);
    hi[12] = b12h ^ (~b13h & b14h);
    lo[13] = b13l ^ (~b14l & b10l);
    hi[13] = b13h ^ (~b14h & b10h);
    lo[14] = b14l ^ (~b10l & b11l);
    hi[14] = b14h ^ (~b10h & b11h);
    lo[15] = b15l ^ (~b16l & b17l);
    hi[15] = b15h ^ (~b16h & b17h);
    lo[16] = b16l ^ (~b17l & b18l);
    hi[16] = b16h ^ (~b17h & b18h);
    lo[17] = b17l ^ (~b18l & b19l);
    hi[17] = b17h ^ (~b18h & b19h);
    lo[18] = b18l ^ (~b19l & b15l);
    hi[18] = b18h ^ (~b19h & b15h);
    lo[19] = b19l ^ (~b15l & b16l);
    hi[19] = b19h ^ (~b15h & b16h);
    lo[20] = b20l ^ (~b21l & b22l);
    hi[20] = b20h ^ (~b21h & b22h);
    lo[21] = b21l ^ (~b22l & b23l);
    hi[21] = b21h ^ (~b22h & b23h);
    lo[22] = b22l ^ (~b23l & b24l);
    hi[22] = b22h ^ (~b23h & b24h);
    lo[23] = b23l ^ (~b24l & b20l);
    hi[23] = b23h ^ (~b24h & b20h);
    lo[24] = b24l ^ (~b20l & b21l);
    hi[24] = b24h ^ (~b20h & b21h);
    lo[0] = lo[0]! ^ RC_LO[round]!;
    hi[0] = hi[0]! ^ RC_HI[round]!;
  }
}

export function keccak256(data: Uint8Array | string): Uint8Array {
  const bytes = typeof data === 'string' ? new TextEncoder().encode(data) : data;
  const rate = 136;
  const lo = new Uint32Array(25),
    hi = new Uint32Array(25);
  const padded = new Uint8Array(Math.floor(bytes.length / rate + 1) * rate);
  padded.set(bytes);
  padded[bytes.length] = padded[bytes.length]! ^ 0x01;
  padded[padded.length - 1] = padded[padded.length - 1]! ^ 0x80;
  for (let off = 0; off < padded.length; off += rate) {
    for (let i = 0; i < rate / 8; i++) {
      const p = off + i * 8;
      lo[i] = lo[i]! ^ (padded[p]! | (padded[p + 1]! << 8) | (padded[p + 2]! << 16) | (padded[p + 3]! << 24));
      hi[i] = hi[i]! ^ (padded[p + 4]! | (padded[p + 5]! << 8) | (padded[p + 6]! << 16) | (padded[p + 7]! << 24));
    }
    keccakF(lo, hi);
  }
  const out = new Uint8Array(32);
  for (let i = 0; i < 4; i++) {
    for (let b = 0; b < 4; b++) {
      out[i * 8 + b] = (lo[i]! >>> (8 * b)) & 0xff;
      out[i * 8 + 4 + b] = (hi[i]! >>> (8 * b)) & 0xff;
    }
  }
  return out;
}

export function keccak256Hex(data: Uint8Array | string): string {
  return '0x' + Buffer.from(keccak256(data)).toString('hex');
}

const CK_LO = new Uint32Array(25),
  CK_HI = new Uint32Array(25);
const CK_OUT = Buffer.alloc(42);

/**
 * EIP-55 of a lower-case 0x address written as 42 ASCII bytes at dst[o]: the 40 hex digits are absorbed
 * straight into the state (one block, no allocation) and a letter is upper-cased when its hash nibble is >= 8.
 */
export function checksumAsciiInto(lower: string, dst: Uint8Array, o: number): void {
  const lo = CK_LO,
    hi = CK_HI;
  lo.fill(0);
  hi.fill(0);
  const at = (i: number): number =>
    lower.charCodeAt(2 + i) | (lower.charCodeAt(3 + i) << 8) | (lower.charCodeAt(4 + i) << 16) | (lower.charCodeAt(5 + i) << 24);
  for (let i = 0; i < 5; i++) {
    lo[i] = at(8 * i);
    hi[i] = at(8 * i + 4);
  }
  lo[5] = 0x01; // padding: byte 40 (lane 5, low byte)
  hi[16] = 0x80000000; // and byte 135, the last of the 136-byte block (lane 16, high byte)
  keccakF(lo, hi);
  dst[o] = 48;
  dst[o + 1] = 120;
  for (let i = 0; i < 40; i++) {
    const k = i >> 1,
      lane = k >> 3,
      b = k & 7;
    const byte = (b < 4 ? lo[lane]! >>> (8 * b) : hi[lane]! >>> (8 * (b - 4))) & 0xff;
    const nibble = i % 2 === 0 ? byte >> 4 : byte & 0xf;
    const c = lower.charCodeAt(2 + i);
    dst[o + 2 + i] = c >= 97 && nibble >= 8 ? c - 32 : c;
  }
}

/** EIP-55 mixed-case checksum of a lower-case 0x address. */
export function toChecksumAddress(lower: string): string {
  checksumAsciiInto(lower, CK_OUT, 0);
  return CK_OUT.toString('latin1');
}
