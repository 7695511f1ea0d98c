/**
 * A validating scanner of listing bodies: finds the entries' list of a JSON body as bytes and, for every entry,
 * where the values of the fields a dataset reads sit, without building a JS object per entry. What it returns
 * is a statement about what `JSON.parse` gives for the same body (decoded as UTF-8):
 *
 * - the body is valid JSON (the whole grammar: whitespace, literals, numbers, strings with their escapes and the
 *   ban on raw control characters, nesting), and valid UTF-8;
 * - following `at` from the root through objects, each key exactly once in its object, leads to an array, the
 *   list, at bytes `[start, end)`; `JSON.parse` of those bytes is the very list of the parsed body;
 * - every element of the list is an object without a repeated key (JSON.parse keeps the last of repeated keys;
 *   such a body is not scanned), and for each of `fields`, the value is absent, `null`, a string (its content
 *   bytes, with or without escapes) or another JSON value (its bytes);
 * - the keys that are not among `fields`, in the order the parsed objects enumerate them (no such key looks
 *   like an array index, which objects would list first), with how many entries carry each.
 *
 * Anything else (invalid JSON, another shape, a repeated key, nesting deeper than 256) returns undefined, and
 * the caller parses the body the ordinary way. The scanner never decides that a body is bad: JSON.parse does.
 */

import { isUtf8 } from 'node:buffer';
import { bugError } from '../errors.js';

/** The value of a field in an entry: */
export const ABSENT = 0;
export const NULL = 1;
/** A string without escapes: its content bytes are its UTF-8 text. */
export const STRING = 2;
/** A string with escapes: its content bytes are JSON string text. */
export const ESCAPED = 3;
/** A number, boolean, object or array: its bytes are the JSON value. */
export const OTHER = 4;

/** What to scan for: where the list is and which entry fields to locate. */
export interface ListScan {
  /** Keys from the body's root to the list, through objects; not empty. */
  at: readonly string[];
  /** Top-level entry fields whose values are located. */
  fields: readonly string[];
  /** Bodies larger than this are not scanned. */
  maxBytes?: number;
}

/** An unknown key of the entries and how many entries carry it. */
export interface UnknownKey {
  name: string;
  entries: number;
}

/** The result of `scanList`; see the file comment for what it guarantees. */
export class ScannedList {
  constructor(
    readonly bytes: Buffer,
    /** The list's `[`. */
    readonly start: number,
    /** Just after the list's `]`. */
    readonly end: number,
    readonly count: number,
    readonly fields: readonly string[],
    /** `count * fields.length` tags (ABSENT...OTHER), entry-major. */
    readonly tags: Uint8Array,
    /** Start and end of each value: string content without the quotes, else the value's bytes. */
    readonly spans: Int32Array,
    /** Keys not among `fields`, in the order parsed entries enumerate them (first seen first). */
    readonly unknown: readonly UnknownKey[],
  ) {}

  /** Set once the body's buffer is given back for another body (body-pool.ts `releaseBody`): reading is a bug. */
  private retired = false;

  retire(): void {
    this.retired = true;
  }

  private check(): void {
    if (this.retired) throw bugError('a page body was read after staging gave its buffer back for another body');
  }

  tag(entry: number, field: number): number {
    return this.tags[entry * this.fields.length + field]!;
  }

  /** Where a field's value (string content, or the value) starts. */
  valueStart(entry: number, field: number): number {
    return this.spans[2 * (entry * this.fields.length + field)]!;
  }

  valueEnd(entry: number, field: number): number {
    return this.spans[2 * (entry * this.fields.length + field) + 1]!;
  }

  /** The field's value as the parsed entry holds it (`undefined` when absent). */
  value(entry: number, field: number): unknown {
    this.check();
    const slot = entry * this.fields.length + field;
    const s = this.spans[2 * slot]!,
      e = this.spans[2 * slot + 1]!;
    switch (this.tags[slot]) {
      case ABSENT:
        return undefined;
      case NULL:
        return null;
      case STRING:
        return this.bytes.toString('utf8', s, e);
      case ESCAPED:
        return JSON.parse(this.bytes.toString('utf8', s - 1, e + 1)) as string;
      default:
        return JSON.parse(this.bytes.toString('utf8', s, e)) as unknown;
    }
  }

  /** The list as JSON.parse gives it. */
  parse(): unknown[] {
    this.check();
    return JSON.parse(this.bytes.toString('utf8', this.start, this.end)) as unknown[];
  }

  /** The body's text with the list replaced by `[]`: JSON.parse of it is the parsed body, but for the list. */
  envelopeText(): string {
    this.check();
    return `${this.bytes.toString('utf8', 0, this.start)}[]${this.bytes.toString('utf8', this.end)}`;
  }
}

const MAX_DEPTH = 256;

/** JSON whitespace. */
const WS = new Uint8Array(256);
for (const c of [0x20, 0x09, 0x0a, 0x0d]) WS[c] = 1;
/** Bytes that stand for themselves in a string: not `"`, `\` or a control character (UTF-8 is checked whole). */
const PLAIN = new Uint8Array(256);
for (let c = 0x20; c < 256; c++) if (c !== 0x22 && c !== 0x5c) PLAIN[c] = 1;
/** The characters after `\` of the two-character escapes: `" \ / b f n r t`. */
const SHORT_ESCAPE = new Uint8Array(256);
for (const c of '"\\/bfnrt') SHORT_ESCAPE[c.charCodeAt(0)] = 1;
const HEX = new Uint8Array(256);
for (const c of '0123456789abcdefABCDEF') HEX[c.charCodeAt(0)] = 1;
const isDigit = (c: number): boolean => c >= 0x30 && c <= 0x39;
const isPlain = (bytes: Uint8Array): boolean => bytes.every((c) => PLAIN[c] === 1);

/** Thrown inside the scanner for anything it does not take; never escapes `scanList`. */
const REFUSED = new Error('not scanned');
/** Code points a key decoded from escapes must not contain: lone surrogates would not compare by their bytes. */
const SURROGATE = /[\uD800-\uDFFF]/;

/**
 * Scans `bytes` for the list at `at` and the values of `fields` in its entries. Returns undefined whenever the
 * body is outside what the scanner takes (then JSON.parse decides what the body is).
 */
export function scanList(bytes: Buffer, at: readonly string[], fields: readonly string[]): ScannedList | undefined {
  if (at.length === 0 || !isUtf8(bytes)) return undefined;
  try {
    return new Scanner(bytes, at, fields).run();
  } catch (e) {
    if (e === REFUSED) return undefined;
    throw e;
  }
}

class Scanner {
  private p = 0;
  private readonly n: number;
  /** Set by `string()`: whether the string just scanned had escapes. */
  private escaped = false;
  private readonly atKeys: Buffer[];
  private readonly nf: number;
  /** Key bytes of every id: fields first, then unknown keys as met. */
  private readonly keyBytes: Buffer[] = [];
  /** Latin-1 reading of a key's UTF-8 bytes -> id (a Map key that needs no decoding). */
  private readonly ids = new Map<string, number>();
  private readonly unknown: UnknownKey[] = [];
  /** Per unknown key: 1 + the last entry that carried it. */
  private seen: number[] = [];
  /** Per id: whether its key bytes are all PLAIN (then equal bytes followed by a quote are that key). */
  private readonly plainKey: boolean[] = [];
  /** Id of the key at each position of the previous entry: the next entry usually has the same keys in order. */
  private readonly predicted: number[] = [];
  private cap: number;
  private tags: Uint8Array;
  private spans: Int32Array;
  private count = 0;
  private listStart = -1;
  private listEnd = -1;
  /** The body as 32-bit words, for skipping over string content four bytes at a time (see `plainEnd`). */
  private readonly words: Int32Array;
  /** Bytes of the first word that lie before the body's first byte. */
  private readonly wordOffset: number;

  constructor(
    private readonly b: Buffer,
    private readonly at: readonly string[],
    private readonly fields: readonly string[],
  ) {
    this.n = b.length;
    this.wordOffset = b.byteOffset & 3;
    this.words = new Int32Array(b.buffer, b.byteOffset - this.wordOffset, (b.length + this.wordOffset) >> 2);
    this.atKeys = at.map((k) => Buffer.from(k, 'utf8'));
    this.nf = fields.length;
    fields.forEach((f, i) => {
      const kb = Buffer.from(f, 'utf8');
      // A field named twice would be located once: refuse such a request rather than guess.
      if (this.ids.has(kb.toString('latin1'))) throw REFUSED;
      this.ids.set(kb.toString('latin1'), i);
      this.keyBytes.push(kb);
      this.plainKey.push(isPlain(kb));
    });
    // Listing pages hold up to 1000 entries of a few hundred bytes: start near that, grow by doubling.
    this.cap = Math.max(16, Math.min(1024, b.length >> 8));
    this.tags = new Uint8Array(this.cap * this.nf);
    this.spans = new Int32Array(this.cap * this.nf * 2);
  }

  run(): ScannedList {
    this.ws();
    this.pathObject(0);
    this.ws();
    if (this.p !== this.n || this.listStart < 0) throw REFUSED;
    const nf = this.nf;
    return new ScannedList(
      this.b,
      this.listStart,
      this.listEnd,
      this.count,
      this.fields,
      this.tags.subarray(0, this.count * nf),
      this.spans.subarray(0, this.count * nf * 2),
      this.unknown,
    );
  }

  private ws(): void {
    const b = this.b,
      n = this.n;
    let p = this.p;
    while (p < n && WS[b[p]!] === 1) p++;
    this.p = p;
  }

  private expect(c: number): void {
    if (this.p >= this.n || this.b[this.p] !== c) throw REFUSED;
    this.p++;
  }

  /**
   * Where the run of PLAIN bytes starting at `e` ends: the index of the first quote, backslash or control
   * character, or the body's length. Whole words with none of them are skipped four bytes at a time (the
   * tests below are exact for "some byte of the word is one of them": a word they pass holds none).
   */
  private plainEnd(e: number): number {
    const b = this.b;
    const off = this.wordOffset;
    while (((e + off) & 3) !== 0) {
      if (PLAIN[b[e]!] !== 1) return e; // also at the end: b[n] is undefined
      e++;
    }
    const w = this.words;
    let j = (e + off) >> 2;
    for (; j < w.length; j++) {
      const x = w[j]!;
      const quote = x ^ 0x22222222;
      const backslash = x ^ 0x5c5c5c5c;
      // A zero byte of `quote` or `backslash`, or a byte of `x` below 0x20.
      if ((((quote - 0x01010101) & ~quote) | ((backslash - 0x01010101) & ~backslash) | ((x - 0x20202020) & ~x)) & 0x80808080) break;
    }
    e = (j << 2) - off;
    while (PLAIN[b[e]!] === 1) e++;
    return e;
  }

  /** A string at `p` (its opening quote): moves past it, returns where its closing quote is, sets `escaped`. */
  private string(): number {
    const b = this.b,
      n = this.n;
    let i = this.p + 1;
    let escaped = false;
    for (;;) {
      i = this.plainEnd(i);
      if (i >= n) throw REFUSED;
      const c = b[i]!;
      if (c === 0x22) break;
      if (c !== 0x5c) throw REFUSED; // a raw control character
      escaped = true;
      if (i + 1 >= n) throw REFUSED;
      const d = b[i + 1]!;
      if (d === 0x75) {
        if (i + 5 >= n || HEX[b[i + 2]!] !== 1 || HEX[b[i + 3]!] !== 1 || HEX[b[i + 4]!] !== 1 || HEX[b[i + 5]!] !== 1) throw REFUSED;
        i += 6;
      } else if (SHORT_ESCAPE[d] === 1) i += 2;
      else throw REFUSED;
    }
    this.escaped = escaped;
    this.p = i + 1;
    return i;
  }

  /** The text of the key whose content is `[s, e)`, decoded, as a Latin-1 reading of its UTF-8 bytes. */
  private keyText(s: number, e: number, escaped: boolean): string {
    if (!escaped) return this.b.toString('latin1', s, e);
    const name = JSON.parse(this.b.toString('utf8', s - 1, e + 1)) as string;
    if (SURROGATE.test(name)) throw REFUSED;
    return Buffer.from(name, 'utf8').toString('latin1');
  }

  private sameBytes(s: number, e: number, key: Buffer): boolean {
    if (e - s !== key.length) return false;
    const b = this.b;
    for (let i = 0; i < key.length; i++) if (b[s + i] !== key[i]) return false;
    return true;
  }

  /** An object on the path to the list (`level` keys of `at` already followed). */
  private pathObject(level: number): void {
    this.expect(0x7b);
    this.ws();
    let found = false;
    if (this.b[this.p] === 0x7d) {
      this.p++;
    } else {
      for (;;) {
        if (this.b[this.p] !== 0x22) throw REFUSED;
        const s = this.p + 1;
        const e = this.string();
        const isPath = this.escaped ? this.keyText(s, e, true) === this.atKeys[level]!.toString('latin1') : this.sameBytes(s, e, this.atKeys[level]!);
        this.ws();
        this.expect(0x3a);
        this.ws();
        if (isPath) {
          if (found) throw REFUSED; // JSON.parse would keep the last one
          found = true;
          if (level + 1 < this.at.length) this.pathObject(level + 1);
          else this.list();
        } else this.value(level + 1);
        this.ws();
        const c = this.b[this.p];
        this.p++;
        if (c === 0x2c) this.ws();
        else if (c === 0x7d) break;
        else throw REFUSED;
      }
    }
    if (!found) throw REFUSED;
  }

  private list(): void {
    this.listStart = this.p;
    this.expect(0x5b);
    this.ws();
    if (this.b[this.p] === 0x5d) this.p++;
    else {
      for (;;) {
        this.entry();
        this.ws();
        const c = this.b[this.p];
        this.p++;
        if (c === 0x2c) this.ws();
        else if (c === 0x5d) break;
        else throw REFUSED;
      }
    }
    this.listEnd = this.p;
  }

  private grow(): void {
    this.cap *= 2;
    const tags = new Uint8Array(this.cap * this.nf);
    tags.set(this.tags);
    const spans = new Int32Array(this.cap * this.nf * 2);
    spans.set(this.spans);
    this.tags = tags;
    this.spans = spans;
  }

  /** Id of the key `[s, e)` at position `k` of its entry: a field's index, or nf + an unknown key's index. */
  private keyId(s: number, e: number, escaped: boolean, k: number): number {
    const text = this.keyText(s, e, escaped);
    let id = this.ids.get(text);
    if (id === undefined) {
      // Parsed objects list array-index keys first: keep the byte order equal to theirs.
      const c0 = text.charCodeAt(0);
      if (c0 >= 0x30 && c0 <= 0x39) throw REFUSED;
      id = this.nf + this.unknown.length;
      this.ids.set(text, id);
      const bytes = Buffer.from(text, 'latin1');
      this.keyBytes.push(bytes);
      this.plainKey.push(isPlain(bytes));
      this.unknown.push({ name: bytes.toString('utf8'), entries: 0 });
      this.seen.push(0);
    }
    this.predicted[k] = id;
    return id;
  }

  /**
   * One entry of the list. The hot loop of the scanner, so positions live in locals and pass to its steps as
   * arguments and results rather than through `this.p`: a key is first compared with the key at the same position
   * of the previous entry (entries of a listing share their layout), and a plain string value is run over in one
   * loop; anything less common goes through the general methods.
   */
  private entry(): void {
    const b = this.b;
    let p = this.p;
    if (b[p] !== 0x7b) throw REFUSED;
    p++;
    const i = this.count;
    if (i === this.cap) this.grow();
    this.count++;
    const nf = this.nf;
    const base = i * nf;
    while (WS[b[p]!] === 1) p++;
    if (b[p] === 0x7d) {
      this.p = p + 1;
      return;
    }
    for (let k = 0; ; k++) {
      if (b[p] !== 0x22) throw REFUSED;
      let id = this.predicted[k] ?? -1;
      const ke = this.predictedKeyEnd(p + 1, id);
      if (ke >= 0) p = ke;
      else {
        id = this.key(p, k);
        p = this.p;
      }
      while (WS[b[p]!] === 1) p++;
      if (b[p] !== 0x3a) throw REFUSED;
      p++;
      while (WS[b[p]!] === 1) p++;
      p = id < nf ? this.fieldValue(base + id, p) : this.unknownValue(id - nf, i, p);
      while (WS[b[p]!] === 1) p++;
      const c = b[p];
      p++;
      if (c === 0x2c) while (WS[b[p]!] === 1) p++;
      else if (c === 0x7d) {
        this.p = p;
        return;
      } else throw REFUSED;
    }
  }

  /**
   * Just past the key whose content starts at `ks` when it is the key of id `guess` (the previous entry's at this
   * position), else -1: bytes equal to a key without `"`, `\` or control characters, then a quote, are that key.
   */
  private predictedKeyEnd(ks: number, guess: number): number {
    if (guess < 0 || !this.plainKey[guess]) return -1;
    const b = this.b;
    const kb = this.keyBytes[guess]!;
    const len = kb.length;
    if (b[ks + len] !== 0x22) return -1;
    for (let j = 0; j < len; j++) if (b[ks + j] !== kb[j]) return -1;
    return ks + len + 1;
  }

  /** The key at `p` (its quote), the `k`th of its entry, read the general way: moves past it, returns its id. */
  private key(p: number, k: number): number {
    this.p = p;
    const ke = this.string();
    return this.keyId(p + 1, ke, this.escaped, k);
  }

  /** The value at `p` of a field, at `slot` of the tags: located (tag and span); returns its end. */
  private fieldValue(slot: number, p: number): number {
    const b = this.b;
    if (this.tags[slot] !== ABSENT) throw REFUSED; // a repeated key
    if (b[p] === 0x22) {
      const e = this.plainEnd(p + 1);
      if (b[e] === 0x22) {
        this.tags[slot] = STRING;
        this.spans[2 * slot] = p + 1;
        this.spans[2 * slot + 1] = e;
        return e + 1;
      }
    }
    return this.otherFieldValue(slot, p);
  }

  /** As `fieldValue`, for any value but a string without escapes. */
  private otherFieldValue(slot: number, p: number): number {
    const tags = this.tags,
      spans = this.spans;
    const c = this.b[p];
    this.p = p;
    if (c === 0x22) {
      const ve = this.string();
      tags[slot] = this.escaped ? ESCAPED : STRING;
      spans[2 * slot] = p + 1;
      spans[2 * slot + 1] = ve;
    } else if (c === 0x6e) {
      this.literal(NULL_BYTES);
      tags[slot] = NULL;
    } else {
      this.value(1);
      tags[slot] = OTHER;
      spans[2 * slot] = p;
      spans[2 * slot + 1] = this.p;
    }
    return this.p;
  }

  /** The value at `p` of the `u`th unknown key, in entry `i`: counted and skipped; returns its end. */
  private unknownValue(u: number, i: number, p: number): number {
    if (this.seen[u] === i + 1) throw REFUSED; // a repeated key
    this.seen[u] = i + 1;
    this.unknown[u]!.entries++;
    this.p = p;
    this.value(1);
    return this.p;
  }

  private literal(word: Uint8Array): void {
    const b = this.b;
    const p = this.p;
    if (p + word.length > this.n) throw REFUSED;
    for (let i = 0; i < word.length; i++) if (b[p + i] !== word[i]) throw REFUSED;
    this.p = p + word.length;
  }

  private number(): void {
    const b = this.b,
      n = this.n;
    let p = this.p;
    if (b[p] === 0x2d) p++;
    if (p >= n) throw REFUSED;
    if (b[p] === 0x30) p++;
    else if (b[p]! >= 0x31 && b[p]! <= 0x39) {
      p++;
      while (p < n && isDigit(b[p]!)) p++;
    } else throw REFUSED;
    if (p < n && b[p] === 0x2e) {
      p++;
      if (!(p < n && isDigit(b[p]!))) throw REFUSED;
      while (p < n && isDigit(b[p]!)) p++;
    }
    if (p < n && (b[p] === 0x65 || b[p] === 0x45)) {
      p++;
      if (p < n && (b[p] === 0x2b || b[p] === 0x2d)) p++;
      if (!(p < n && isDigit(b[p]!))) throw REFUSED;
      while (p < n && isDigit(b[p]!)) p++;
    }
    this.p = p;
  }

  /** Any JSON value at `p`, checked and skipped. */
  private value(depth: number): void {
    if (this.p >= this.n) throw REFUSED;
    const c = this.b[this.p]!;
    switch (c) {
      case 0x22:
        this.string();
        return;
      case 0x7b:
        this.object(depth);
        return;
      case 0x5b:
        this.array(depth);
        return;
      case 0x74:
        this.literal(TRUE_BYTES);
        return;
      case 0x66:
        this.literal(FALSE_BYTES);
        return;
      case 0x6e:
        this.literal(NULL_BYTES);
        return;
      default:
        if (c === 0x2d || isDigit(c)) this.number();
        else throw REFUSED;
    }
  }

  /** An object at `p` (its `{`) inside a value, `depth` levels down: checked and skipped. */
  private object(depth: number): void {
    if (depth >= MAX_DEPTH) throw REFUSED;
    this.p++;
    this.ws();
    if (this.b[this.p] === 0x7d) {
      this.p++;
      return;
    }
    for (;;) {
      if (this.b[this.p] !== 0x22) throw REFUSED;
      this.string();
      this.ws();
      this.expect(0x3a);
      this.ws();
      this.value(depth + 1);
      if (this.endOfMember(0x7d)) return;
    }
  }

  /** An array at `p` (its `[`) inside a value, `depth` levels down: checked and skipped. */
  private array(depth: number): void {
    if (depth >= MAX_DEPTH) throw REFUSED;
    this.p++;
    this.ws();
    if (this.b[this.p] === 0x5d) {
      this.p++;
      return;
    }
    for (;;) {
      this.value(depth + 1);
      if (this.endOfMember(0x5d)) return;
    }
  }

  /** After a member of an object or array: moves past `,` (false: another member follows) or `close` (true). */
  private endOfMember(close: number): boolean {
    this.ws();
    const d = this.b[this.p];
    this.p++;
    if (d === 0x2c) {
      this.ws();
      return false;
    }
    if (d === close) return true;
    throw REFUSED;
  }
}

const TRUE_BYTES = Buffer.from('true');
const FALSE_BYTES = Buffer.from('false');
const NULL_BYTES = Buffer.from('null');
