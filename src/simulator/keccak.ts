// Keccak-256 (the pre-standard padding Ethereum uses), on 32-bit lane halves. Used for EIP-55 checksum case
// and event/function signature hashes. Small inputs only; not a hot path (results are cached by callers).

const RC_HI = new Uint32Array([
  0x00000000, 0x00000000, 0x80000000, 0x80000000, 0x00000000, 0x00000000, 0x80000000, 0x80000000, 0x00000000,
  0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x80000000, 0x80000000, 0x80000000, 0x80000000, 0x80000000,
  0x00000000, 0x80000000, 0x80000000, 0x80000000, 0x00000000, 0x80000000,
]);
const RC_LO = new Uint32Array([
  0x00000001, 0x00008082, 0x0000808a, 0x80008000, 0x0000808b, 0x80000001, 0x80008081, 0x00008009, 0x0000008a,
  0x00000088, 0x80008009, 0x8000000a, 0x8000808b, 0x0000008b, 0x00008089, 0x00008003, 0x00008002, 0x00000080,
  0x0000800a, 0x8000000a, 0x80008081, 0x00008080, 0x80000001, 0x80008008,
]);
// Rotation offsets by lane index x + 5y.
const ROT = [0, 1, 62, 28, 27, 36, 44, 6, 55, 20, 3, 10, 43, 25, 39, 41, 45, 15, 21, 8, 18, 2, 61, 56, 14];

const cLo = new Uint32Array(5), cHi = new Uint32Array(5);
const bLo = new Uint32Array(25), bHi = new Uint32Array(25);

function keccakF(lo: Uint32Array, hi: Uint32Array): void {
  for (let round = 0; round < 24; round++) {
    for (let x = 0; x < 5; x++) {
      cLo[x] = lo[x]! ^ lo[x + 5]! ^ lo[x + 10]! ^ lo[x + 15]! ^ lo[x + 20]!;
      cHi[x] = hi[x]! ^ hi[x + 5]! ^ hi[x + 10]! ^ hi[x + 15]! ^ hi[x + 20]!;
    }
    for (let x = 0; x < 5; x++) {
      const l1 = cLo[(x + 1) % 5]!, h1 = cHi[(x + 1) % 5]!;
      const dLo = cLo[(x + 4) % 5]! ^ ((l1 << 1) | (h1 >>> 31));
      const dHi = cHi[(x + 4) % 5]! ^ ((h1 << 1) | (l1 >>> 31));
      for (let y = 0; y < 25; y += 5) {
        lo[x + y] = lo[x + y]! ^ dLo;
        hi[x + y] = hi[x + y]! ^ dHi;
      }
    }
    for (let x = 0; x < 5; x++) {
      for (let y = 0; y < 5; y++) {
        const i = x + 5 * y;
        const r = ROT[i]!;
        const l = lo[i]!, h = hi[i]!;
        let rl: number, rh: number;
        if (r === 0) { rl = l; rh = h; }
        else if (r < 32) { rl = (l << r) | (h >>> (32 - r)); rh = (h << r) | (l >>> (32 - r)); }
        else if (r === 32) { rl = h; rh = l; }
        else { const s = r - 32; rl = (h << s) | (l >>> (32 - s)); rh = (l << s) | (h >>> (32 - s)); }
        const j = y + 5 * ((2 * x + 3 * y) % 5);
        bLo[j] = rl; bHi[j] = rh;
      }
    }
    for (let y = 0; y < 25; y += 5) {
      for (let x = 0; x < 5; x++) {
        lo[x + y] = bLo[x + y]! ^ (~bLo[((x + 1) % 5) + y]! & bLo[((x + 2) % 5) + y]!);
        hi[x + y] = bHi[x + y]! ^ (~bHi[((x + 1) % 5) + y]! & bHi[((x + 2) % 5) + y]!);
      }
    }
    lo[0] = lo[0]! ^ RC_LO[round]!;
    hi[0] = hi[0]! ^ RC_HI[round]!;
  }
}

export function keccak256(data: Uint8Array | string): Uint8Array {
  const bytes = typeof data === 'string' ? new TextEncoder().encode(data) : data;
  const rate = 136;
  const lo = new Uint32Array(25), hi = new Uint32Array(25);
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

/** EIP-55 mixed-case checksum of a lower-case 0x address. */
export function toChecksumAddress(lower: string): string {
  const body = lower.slice(2);
  const h = keccak256(body);
  let out = '0x';
  for (let i = 0; i < 40; i++) {
    const c = body[i]!;
    const nibble = (h[i >> 1]! >> (i % 2 === 0 ? 4 : 0)) & 0xf;
    out += c >= 'a' && nibble >= 8 ? c.toUpperCase() : c;
  }
  return out;
}
