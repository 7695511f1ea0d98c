// A reusable ASCII byte writer for the hot listing path: rows are written straight into one buffer, with no
// intermediate strings (string concatenation and flattening dominated the profile at ~200k rows/s).

const HEX_LO = new Uint8Array(16), HEX_UP = new Uint8Array(16);
for (let i = 0; i < 16; i++) { HEX_LO[i] = '0123456789abcdef'.charCodeAt(i); HEX_UP[i] = '0123456789ABCDEF'.charCodeAt(i); }

export function ascii(s: string): Uint8Array { return Buffer.from(s, 'latin1'); }

export class ByteOut {
  buf: Buffer = Buffer.allocUnsafe(1 << 21);
  pos = 0;

  reset(): void { this.pos = 0; }

  ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    const b = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + n));
    this.buf.copy(b, 0, 0, this.pos);
    this.buf = b;
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

  uint(n: number): void {
    const buf = this.buf;
    if (n < 10) { buf[this.pos++] = 48 + n; return; }
    let digits = 0;
    for (let x = n; x >= 1; x = Math.floor(x / 10)) digits++;
    let p = this.pos + digits;
    this.pos = p;
    let x = n;
    while (x >= 1) { const q = Math.floor(x / 10); buf[--p] = 48 + (x - q * 10); x = q; }
  }

  /** 8 hex digits of a uint32. */
  word(w: number, upper: boolean): void {
    const t = upper ? HEX_UP : HEX_LO;
    const buf = this.buf;
    const p = this.pos;
    buf[p] = t[(w >>> 28) & 15]!; buf[p + 1] = t[(w >>> 24) & 15]!; buf[p + 2] = t[(w >>> 20) & 15]!; buf[p + 3] = t[(w >>> 16) & 15]!;
    buf[p + 4] = t[(w >>> 12) & 15]!; buf[p + 5] = t[(w >>> 8) & 15]!; buf[p + 6] = t[(w >>> 4) & 15]!; buf[p + 7] = t[w & 15]!;
    this.pos = p + 8;
  }

  byte(c: number): void { this.buf[this.pos++] = c; }

  take(): Buffer {
    const out = Buffer.allocUnsafe(this.pos);
    this.buf.copy(out, 0, 0, this.pos);
    this.pos = 0;
    return out;
  }
}
