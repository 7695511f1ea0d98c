// A reusable ASCII byte writer for the hot listing path: rows are written straight into one buffer, with no
// intermediate strings (string concatenation and flattening dominated the profile at ~200k rows/s).

const HEX_LO = new Uint8Array(16),
  HEX_UP = new Uint8Array(16);
for (let i = 0; i < 16; i++) {
  HEX_LO[i] = '0123456789abcdef'.charCodeAt(i);
  HEX_UP[i] = '0123456789ABCDEF'.charCodeAt(i);
}

/** Tens and units digit (ASCII) of 0..99. */
const DIG_HI = new Uint8Array(100),
  DIG_LO = new Uint8Array(100);
for (let i = 0; i < 100; i++) {
  DIG_HI[i] = 48 + Math.floor(i / 10);
  DIG_LO[i] = 48 + (i % 10);
}

/** Digits of n >= 1e10 (powers of ten up to 1e22 are exact doubles, so the comparisons are exact). */
function slowDigits(n: number): number {
  let d = 11,
    p10 = 1e11;
  while (n >= p10) {
    d++;
    p10 *= 10;
  }
  return d;
}

export function ascii(s: string): Uint8Array {
  return Buffer.from(s, 'latin1');
}

/**
 * A literal of 4 or more ASCII bytes as little-endian 32-bit words: at offsets 0, 4, 8, … and a last word
 * ending exactly at the literal's end (overlapping the one before). Written with one 32-bit store per word:
 * byte-by-byte copy loops of the ~20 short keys of a transaction row were a fifth of its cost.
 */
export interface Lit {
  readonly n: number;
  readonly w: Uint32Array;
}
export function lit(s: string): Lit {
  if (s.length < 4) throw new RangeError(`lit: '${s}' is shorter than 4 bytes`);
  const at = (i: number): number => s.charCodeAt(i) | (s.charCodeAt(i + 1) << 8) | (s.charCodeAt(i + 2) << 16) | (s.charCodeAt(i + 3) << 24);
  const w: number[] = [];
  for (let i = 0; i + 4 < s.length; i += 4) w.push(at(i));
  w.push(at(s.length - 4));
  return { n: s.length, w: Uint32Array.from(w, (x) => x >>> 0) };
}

/** Two hex digits of each byte value as a little-endian 16-bit pair, lower and upper case. */
const HEX2_LO = new Uint32Array(256),
  HEX2_UP = new Uint32Array(256);
for (let i = 0; i < 256; i++) {
  HEX2_LO[i] = HEX_LO[i >>> 4]! | (HEX_LO[i & 15]! << 8);
  HEX2_UP[i] = HEX_UP[i >>> 4]! | (HEX_UP[i & 15]! << 8);
}

export class ByteOut {
  buf: Buffer = Buffer.allocUnsafe(INITIAL);
  /** A view of buf for multi-byte stores (replaced with buf). */
  dv = new DataView(this.buf.buffer, this.buf.byteOffset, this.buf.length);
  pos = 0;
  private readonly spare: Buffer[] = [];

  reset(): void {
    this.pos = 0;
  }

  ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    const b = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + n));
    this.buf.copy(b, 0, 0, this.pos);
    this.buf = b;
    this.dv = new DataView(b.buffer, b.byteOffset, b.length);
  }

  /** A literal made by lit(). Callers ensure() room for a whole row first. */
  lit(l: Lit): void {
    const dv = this.dv,
      w = l.w,
      p = this.pos,
      last = w.length - 1;
    for (let i = 0; i < last; i++) dv.setUint32(p + 4 * i, w[i]!, true);
    dv.setUint32(p + l.n - 4, w[last]!, true);
    this.pos = p + l.n;
  }

  /** n bytes copied from src at offset o, 4 at a time (n >= 4; srcDv views src). */
  copy4(srcDv: DataView, o: number, n: number): void {
    const dv = this.dv,
      p = this.pos;
    let i = 0;
    for (; i + 4 < n; i += 4) dv.setUint32(p + i, srcDv.getUint32(o + i, true), true);
    dv.setUint32(p + n - 4, srcDv.getUint32(o + n - 4, true), true);
    this.pos = p + n;
  }

  /** Bytes of a pre-encoded literal. Callers ensure() room for a whole row first. */
  raw(b: Uint8Array): void {
    const buf = this.buf;
    let p = this.pos;
    for (let i = 0; i < b.length; i++) buf[p++] = b[i]!;
    this.pos = p;
  }

  str(s: string): void {
    this.ensure(s.length);
    const buf = this.buf;
    let p = this.pos;
    for (let i = 0; i < s.length; i++) buf[p++] = s.charCodeAt(i);
    this.pos = p;
  }

  /** Decimal digits of a non-negative integer (exact doubles up to 2^53). */
  uint(n: number): void {
    const buf = this.buf;
    let p = this.pos;
    if (n < 10) {
      buf[p] = 48 + n;
      this.pos = p + 1;
      return;
    }
    if (n < 100) {
      buf[p] = DIG_HI[n]!;
      buf[p + 1] = DIG_LO[n]!;
      this.pos = p + 2;
      return;
    }
    // Digit count by comparisons, then two digits per step from a table: the old float-division loops
    // (one to count, one to write) were ~20 % of a transaction row.
    const digits = n < 1e3 ? 3 : n < 1e4 ? 4 : n < 1e5 ? 5 : n < 1e6 ? 6 : n < 1e7 ? 7 : n < 1e8 ? 8 : n < 1e9 ? 9 : n < 1e10 ? 10 : slowDigits(n);
    p += digits;
    this.pos = p;
    let x = n;
    // Above int32 the quotient needs float math; below it the `| 0` divisions compile to multiplications.
    while (x > 0x7fffffff) {
      const q = Math.floor(x / 100);
      const r = x - q * 100;
      buf[--p] = DIG_LO[r]!;
      buf[--p] = DIG_HI[r]!;
      x = q;
    }
    let y = x | 0;
    while (y >= 100) {
      const q = (y / 100) | 0;
      const r = y - q * 100;
      buf[--p] = DIG_LO[r]!;
      buf[--p] = DIG_HI[r]!;
      y = q;
    }
    if (y >= 10) {
      buf[--p] = DIG_LO[y]!;
      buf[--p] = DIG_HI[y]!;
    } else buf[--p] = 48 + y;
  }

  /** 8 hex digits of a uint32, two 32-bit stores. */
  word(w: number, upper: boolean): void {
    const t = upper ? HEX2_UP : HEX2_LO;
    const dv = this.dv,
      p = this.pos;
    dv.setUint32(p, t[w >>> 24]! | (t[(w >>> 16) & 255]! << 16), true);
    dv.setUint32(p + 4, t[(w >>> 8) & 255]! | (t[w & 255]! << 16), true);
    this.pos = p + 8;
  }

  /** 2 lower-case hex digits of a byte value, one 16-bit store. */
  hex2(v: number): void {
    this.dv.setUint16(this.pos, HEX2_LO[v]!, true);
    this.pos += 2;
  }

  byte(c: number): void {
    this.buf[this.pos++] = c;
  }

  take(): Buffer {
    const out = Buffer.allocUnsafe(this.pos);
    this.buf.copy(out, 0, 0, this.pos);
    this.pos = 0;
    return out;
  }

  /**
   * The written bytes without a copy (a page is ~0.7 MB): the writer moves on to a spare buffer, and
   * `release` gives this one back once nobody reads it any more (the server calls it when the response has
   * been handed to the socket). Never calling release is safe: the buffer is then simply not reused.
   */
  takeOwned(): { bytes: Buffer; release: () => void } {
    const buf = this.buf;
    const bytes = buf.subarray(0, this.pos);
    this.buf = this.spare.pop() ?? Buffer.allocUnsafe(INITIAL);
    this.dv = new DataView(this.buf.buffer, this.buf.byteOffset, this.buf.length);
    this.pos = 0;
    let released = false;
    const release = (): void => {
      if (released) return;
      released = true;
      // A few spares cover the responses in flight on a handful of connections; oversized ones go to the GC.
      if (this.spare.length < MAX_SPARES && buf.length <= MAX_SPARE_BYTES) this.spare.push(buf);
    };
    return { bytes, release };
  }
}

const INITIAL = 1 << 21,
  MAX_SPARES = 8,
  MAX_SPARE_BYTES = 1 << 23;
