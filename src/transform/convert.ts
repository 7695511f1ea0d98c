/**
 * Converters from API values to the canonical values staged for DuckDB. They never throw on bad input: a
 * value that does not convert comes back as a `Rejected` carrying the reason, and the caller routes the row
 * to `_rejects`. `null`/`undefined` mean SQL NULL and are handled by the caller (nullability is per column).
 */
export class Rejected {
  constructor(readonly reason: string) {}
}

export type Canonical = string | number | boolean | number[] | null;
export type Converter = (raw: unknown) => Canonical | Rejected;

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const HASH = /^0x[0-9a-fA-F]{64}$/;
const HEX = /^0x[0-9a-fA-F]*$/;
const INTEGER = /^-?\d+$/;
const UNSIGNED = /^\d+$/;
const ISO = /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?(Z|[+-]\d{2}:?\d{2})$/;

const INT64_MAX = 9223372036854775807n;
const INT64_MIN = -9223372036854775808n;
/** DECIMAL(38,0) holds up to 38 digits. */
const DECIMAL38_DIGITS = 38;

const describe = (raw: unknown): string => {
  if (typeof raw === 'string') return raw.length > 80 ? `'${raw.slice(0, 77)}...'` : `'${raw}'`;
  const json = JSON.stringify(raw);
  return json === undefined ? String(raw) : json.length > 80 ? `${json.slice(0, 77)}...` : json;
};

function hexOf(pattern: RegExp, what: string): Converter {
  return (raw) => (typeof raw === 'string' && pattern.test(raw) ? raw.toLowerCase() : new Rejected(`not ${what}: ${describe(raw)}`));
}

/** Integers come as strings (the API's way) or, where a real service slips, as JSON integers. */
function integerText(raw: unknown): string | undefined {
  if (typeof raw === 'string') return INTEGER.test(raw) ? raw : undefined;
  if (typeof raw === 'number' && Number.isSafeInteger(raw)) return String(raw);
  return undefined;
}

export const convertBigint: Converter = (raw) => {
  const text = integerText(raw);
  if (text === undefined) return new Rejected(`not an integer: ${describe(raw)}`);
  // Up to 18 digits always fits; only longer text needs the exact range check.
  const digits = text.charCodeAt(0) === 45 ? text.length - 1 : text.length;
  if (digits > 18) {
    const n = BigInt(text);
    if (n > INT64_MAX || n < INT64_MIN) return new Rejected(`integer out of BIGINT range: ${describe(raw)}`);
    return n.toString();
  }
  return text;
};

/** Strips leading zeros so the digit count is the magnitude; '0' stays '0'. */
function normaliseUnsigned(text: string): string {
  if (text.length > 1 && text.charCodeAt(0) === 48) {
    const stripped = text.replace(/^0+/, '');
    return stripped === '' ? '0' : stripped;
  }
  return text;
}

/**
 * An amount yields two staged values: the DECIMAL(38,0)-ready text, or NULL when the value has more than 38
 * digits, in which case the exact text goes to the `_raw` companion. `convertAmount` returns the text; the
 * caller asks `fitsDecimal38` to decide which of the two columns gets it.
 */
export const convertAmount: Converter = (raw) => {
  let text: string | undefined;
  if (typeof raw === 'string') text = UNSIGNED.test(raw) ? raw : undefined;
  else if (typeof raw === 'number' && Number.isSafeInteger(raw) && raw >= 0) text = String(raw);
  if (text === undefined) return new Rejected(`not a non-negative integer amount: ${describe(raw)}`);
  return normaliseUnsigned(text);
};

export const fitsDecimal38 = (canonicalAmount: string): boolean => canonicalAmount.length <= DECIMAL38_DIGITS;

const pad2 = (n: number): string => (n < 10 ? `0${n}` : String(n));

/** Canonical timestamp text: `YYYY-MM-DDTHH:MM:SS[.fraction]Z`, always UTC; its first 10 chars are the UTC date. */
export const convertTimestamp: Converter = (raw) => {
  if (typeof raw === 'number') {
    // Epoch numbers: the finance API gives milliseconds. Seconds-magnitude numbers would silently land in
    // 1970, so anything below 10^11 (1973 in ms) is refused rather than guessed at.
    if (!Number.isFinite(raw) || raw < 1e11 || raw > 1e14) return new Rejected(`not an epoch-milliseconds time: ${describe(raw)}`);
    return new Date(raw).toISOString();
  }
  if (typeof raw !== 'string') return new Rejected(`not a timestamp: ${describe(raw)}`);
  const m = ISO.exec(raw);
  if (!m) return new Rejected(`not an ISO 8601 timestamp: ${describe(raw)}`);
  const [, y, mo, d, h, mi, s, frac, zone] = m;
  const year = +y!,
    month = +mo!,
    day = +d!,
    hour = +h!,
    minute = +mi!,
    second = +s!;
  const ms = Date.UTC(year, month - 1, day, hour, minute, second);
  const check = new Date(ms);
  if (check.getUTCFullYear() !== year || check.getUTCMonth() !== month - 1 || check.getUTCDate() !== day || hour > 23 || minute > 59 || second > 59) {
    return new Rejected(`not a valid calendar time: ${describe(raw)}`);
  }
  const fraction = frac ?? '';
  if (zone === 'Z') {
    return raw.charCodeAt(10) === 84 ? raw : `${raw.slice(0, 10)}T${raw.slice(11)}`;
  }
  const sign = zone!.charCodeAt(0) === 45 ? -1 : 1;
  const digits = zone!.replace(':', '');
  const offsetMinutes = sign * (Number(digits.slice(1, 3)) * 60 + Number(digits.slice(3, 5)));
  const utc = new Date(ms - offsetMinutes * 60_000);
  return (
    `${utc.getUTCFullYear()}-${pad2(utc.getUTCMonth() + 1)}-${pad2(utc.getUTCDate())}` +
    `T${pad2(utc.getUTCHours())}:${pad2(utc.getUTCMinutes())}:${pad2(utc.getUTCSeconds())}${fraction}Z`
  );
};

export const convertBool: Converter = (raw) => {
  switch (raw) {
    case '1':
    case 1:
    case true:
      return true;
    case '0':
    case 0:
    case false:
      return false;
    default:
      return new Rejected(`not a 0/1 flag: ${describe(raw)}`);
  }
};

export const convertText: Converter = (raw) => {
  if (typeof raw === 'string') return raw;
  // A number or boolean where text was expected is kept as its exact JSON text rather than refused.
  if (typeof raw === 'number' || typeof raw === 'boolean') return JSON.stringify(raw);
  return new Rejected(`not text: ${describe(raw)}`);
};

const INT32_MAX = 2147483647;
export const convertIntArray: Converter = (raw) => {
  if (!Array.isArray(raw)) return new Rejected(`not a list: ${describe(raw)}`);
  const out: number[] = new Array(raw.length);
  for (let i = 0; i < raw.length; i++) {
    const item: unknown = raw[i];
    const n = typeof item === 'string' && UNSIGNED.test(item) ? Number(item) : typeof item === 'number' ? item : NaN;
    if (!Number.isInteger(n) || n < 0 || n > INT32_MAX) return new Rejected(`list item ${i} is not a small integer: ${describe(raw)}`);
    out[i] = n;
  }
  return out;
};

export const convertJson: Converter = (raw) => {
  if (typeof raw === 'string') {
    // Some services send JSON documents as strings; keep them only if they really are JSON.
    try {
      JSON.parse(raw);
      return raw;
    } catch {
      return new Rejected(`not JSON text: ${describe(raw)}`);
    }
  }
  return JSON.stringify(raw);
};

const DECIMAL_NUMBER = /^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/;
export const convertDouble: Converter = (raw) => {
  if (typeof raw === 'number' && Number.isFinite(raw)) return raw;
  if (typeof raw === 'string' && DECIMAL_NUMBER.test(raw)) return Number(raw);
  return new Rejected(`not a number: ${describe(raw)}`);
};

export const convertAddress: Converter = hexOf(ADDRESS, 'an address (0x + 40 hex digits)');
export const convertHash: Converter = hexOf(HASH, 'a hash (0x + 64 hex digits)');
export const convertHex: Converter = hexOf(HEX, 'hex data (0x + hex digits)');

/**
 * Which API values may be staged exactly as received, leaving their canonical form to DuckDB (each kind's
 * SQL twin sits beside its acceptor in transform/kinds.ts): a value is accepted only when its canonical form is
 * a plain function of its text that SQL reproduces exactly (lower-casing hex, or nothing at all). Anything
 * else (numbers where text is documented, offsets, leading zeros, over 38 digits...) is not rejected here:
 * its page goes the converters' way. Kinds without an acceptor always go that way.
 */
export type Acceptor = (raw: unknown) => boolean;

const BIGINT_TEXT = /^-?\d{1,18}$/;
/** A list item DuckDB's VARCHAR -> INTEGER[] cast reads as the converter does: digits, at most INT32_MAX. */
const isInt32Text = (item: unknown): boolean => typeof item === 'string' && /^\d{1,10}$/.test(item) && Number(item) <= INT32_MAX;
const AMOUNT_TEXT = /^(?:0|[1-9]\d{0,37})$/;
const UTC_TEXT = /^(\d{4}-\d{2}-\d{2})T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{1,9})?Z$/;
/** Calendar dates seen valid or not (keyed yyyymmdd): few distinct days per run, so the date check is a lookup. */
const validDays = new Map<number, boolean>();

/** Whether year, month and day (as written, 0-9999 / 0-99 / 0-99) name a real calendar day. */
function validDate(y: number, m: number, d: number): boolean {
  const key = y * 10_000 + m * 100 + d;
  let ok = validDays.get(key);
  if (ok === undefined) {
    const t = new Date(Date.UTC(y, m - 1, d));
    // Years below 1000 are left to the converter (Date.UTC maps 0-99 to the 1900s).
    ok = y >= 1000 && t.getUTCFullYear() === y && t.getUTCMonth() === m - 1 && t.getUTCDate() === d;
    if (validDays.size > 100_000) validDays.clear();
    validDays.set(key, ok);
  }
  return ok;
}

const validDay = (day: string): boolean => validDate(+day.slice(0, 4), +day.slice(5, 7), +day.slice(8, 10));

/**
 * What a byte acceptor says of a value: REFUSED, or ACCEPTED with UPPER_CASE_HEX set when the value has
 * upper-case hex digits (its canonical form, lower-cased, then differs from its bytes).
 */
export const REFUSED = 0;
export const ACCEPTED = 1;
export const UPPER_CASE_HEX = 2;

/**
 * Per char code: ACCEPTED for a hex digit, with UPPER_CASE_HEX for `A`-`F`; 0 otherwise. A table lookup per
 * char beats the regex ~3x on 66-char hashes.
 */
const HEX_DIGIT = new Uint8Array(256);
for (const c of '0123456789abcdef') HEX_DIGIT[c.charCodeAt(0)] = ACCEPTED;
for (const c of 'ABCDEF') HEX_DIGIT[c.charCodeAt(0)] = ACCEPTED | UPPER_CASE_HEX;

/** `0x` and exactly `digits` hex digits (the same as ADDRESS / HASH). */
function isHexOf(raw: unknown, digits: number): boolean {
  if (typeof raw !== 'string' || raw.length !== digits + 2 || raw.charCodeAt(0) !== 48 || raw.charCodeAt(1) !== 120) return false;
  for (let i = 2; i < raw.length; i++) {
    const c = raw.charCodeAt(i);
    if (c > 127 || HEX_DIGIT[c] === 0) return false;
  }
  return true;
}

/**
 * The canonical value of a value its kind's acceptor passed: what the converter gives, computed the way the
 * SQL side does (transform/kinds.ts keeps each kind's pair together): hex lower-cased, flags as booleans,
 * lists as numbers, the rest as is.
 */
export const canonicalHex = (raw: unknown): Canonical => (raw as string).toLowerCase();
export const canonicalBool = (raw: unknown): Canonical => raw === '1' || raw === true;
export const canonicalIntArray = (raw: unknown): Canonical => (raw as string[]).map(Number);
export const canonicalAsIs = (raw: unknown): Canonical => raw as string;

export const acceptAddress: Acceptor = (raw) => isHexOf(raw, 40);
export const acceptHash: Acceptor = (raw) => isHexOf(raw, 64);
export const acceptHex: Acceptor = (raw) => typeof raw === 'string' && HEX.test(raw);
export const acceptBigint: Acceptor = (raw) => typeof raw === 'string' && BIGINT_TEXT.test(raw);
export const acceptAmount: Acceptor = (raw) => typeof raw === 'string' && AMOUNT_TEXT.test(raw);
export const acceptTimestamp: Acceptor = (raw) => {
  if (typeof raw !== 'string') return false;
  const m = UTC_TEXT.exec(raw);
  return m !== null && validDay(m[1]!);
};
// JSON booleans too: DuckDB reads them as the text 'true' / 'false' (the SQL side in transform/kinds.ts).
export const acceptBool: Acceptor = (raw) => raw === '0' || raw === '1' || raw === true || raw === false;
export const acceptText: Acceptor = (raw) => typeof raw === 'string';
// A list of digit strings: DuckDB reads it as its JSON text and casts that to INTEGER[].
export const acceptIntArray: Acceptor = (raw) => Array.isArray(raw) && raw.every(isInt32Text);

/**
 * The acceptors on bytes: a kind's byte acceptor says what its string acceptor says of the string whose
 * UTF-8 bytes are `b[s..e)` — the content of a JSON string without escapes, as the list scanner (extract/
 * scan.ts) locates it: REFUSED, or ACCEPTED, with UPPER_CASE_HEX for a hex value that has upper-case digits
 * (staging lower-cases those values, so that DuckDB need not lower-case every hex value). The string acceptors
 * stay the reference; a property test ties each to its twin. (Every acceptor passes strings only: a value
 * that is not a string is never accepted, on either side.)
 */
export type ByteAcceptor = (b: Uint8Array, s: number, e: number) => number;

/** A byte acceptor from a test of the bytes, for kinds whose canonical form never differs by case. */
const onBytes =
  (test: (b: Uint8Array, s: number, e: number) => boolean): ByteAcceptor =>
  (b, s, e) =>
    test(b, s, e) ? ACCEPTED : REFUSED;

const isDigitByte = (c: number): boolean => c >= 48 && c <= 57;

/** Digits only in `b[s..e)`. */
function allDigits(b: Uint8Array, s: number, e: number): boolean {
  for (let i = s; i < e; i++) if (!isDigitByte(b[i]!)) return false;
  return true;
}

/** `0x` and exactly `digits` hex digits, or any number of them when `digits` is -1: ACCEPTED (with UPPER_CASE_HEX) or REFUSED. */
function hexBytes(b: Uint8Array, s: number, e: number, digits: number): number {
  if ((digits >= 0 ? e - s !== digits + 2 : e - s < 2) || b[s] !== 48 || b[s + 1] !== 120) return REFUSED;
  let seen = ACCEPTED;
  for (let i = s + 2; i < e; i++) {
    const d = HEX_DIGIT[b[i]!]!;
    if (d === 0) return REFUSED;
    seen |= d;
  }
  return seen;
}

/** Two digits at `i`, as a number. */
const twoDigits = (b: Uint8Array, i: number): number => (b[i]! - 48) * 10 + (b[i + 1]! - 48);

/** UTC_TEXT and a real calendar day, on bytes. */
function isUtcBytes(b: Uint8Array, s: number, e: number): boolean {
  const n = e - s;
  // `YYYY-MM-DDTHH:MM:SSZ` is 20 bytes; a fraction of 1 to 9 digits makes it 22 to 30.
  if (n !== 20 && (n < 22 || n > 30)) return false;
  for (const i of DATE_DIGITS) if (!isDigitByte(b[s + i]!)) return false;
  if (b[s + 4] !== 45 || b[s + 7] !== 45 || b[s + 10] !== 84 || b[s + 13] !== 58 || b[s + 16] !== 58 || b[e - 1] !== 90) return false;
  if (twoDigits(b, s + 11) > 23 || b[s + 14]! > 53 || b[s + 17]! > 53) return false;
  if (n > 20 && (b[s + 19] !== 46 || !allDigits(b, s + 20, e - 1))) return false;
  return validDate(twoDigits(b, s) * 100 + twoDigits(b, s + 2), twoDigits(b, s + 5), twoDigits(b, s + 8));
}
/** Offsets of the digits of `YYYY-MM-DDTHH:MM:SS`. */
const DATE_DIGITS = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18];

export const acceptAddressBytes: ByteAcceptor = (b, s, e) => hexBytes(b, s, e, 40);
export const acceptHashBytes: ByteAcceptor = (b, s, e) => hexBytes(b, s, e, 64);
export const acceptHexBytes: ByteAcceptor = (b, s, e) => hexBytes(b, s, e, -1);
export const acceptBigintBytes: ByteAcceptor = onBytes((b, s, e) => {
  const from = b[s] === 45 && e > s ? s + 1 : s;
  return e - from >= 1 && e - from <= 18 && allDigits(b, from, e);
});
export const acceptAmountBytes: ByteAcceptor = onBytes((b, s, e) => e - s >= 1 && e - s <= 38 && (b[s] === 48 ? e - s === 1 : allDigits(b, s, e)));
export const acceptTimestampBytes: ByteAcceptor = onBytes(isUtcBytes);
export const acceptBoolBytes: ByteAcceptor = onBytes((b, s, e) => e - s === 1 && (b[s] === 48 || b[s] === 49));
export const acceptTextBytes: ByteAcceptor = () => ACCEPTED;
