import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ABSENT, ESCAPED, NULL, OTHER, STRING, scanList, type ScannedList } from '../../src/extract/scan.js';
import { parseBody } from '../../src/extract/transport.js';
import { seeded } from '../reliability/helpers.js';
import { binaryUnit } from '../helpers/arbitraries.js';
import { expectBe, expectEqual } from '../helpers/checks.js';

/**
 * The list scanner against JSON.parse: whenever it returns a list, JSON.parse takes the same body and gives
 * exactly what the scan says (the list, each located value, the unknown keys and their counts, the envelope
 * around the list), on generated pages in every JSON form and on pages mutated byte by byte; and it takes
 * every generated page within its subset, refusing those outside it (repeated keys, odd shapes).
 */

/** JSON as text to write: strings as their value, numbers and literals as their exact text. */
type J =
  | { t: 'str'; s: string }
  | { t: 'num'; text: string }
  | { t: 'lit'; text: 'true' | 'false' | 'null' }
  | { t: 'arr'; items: J[] }
  | { t: 'obj'; members: [string, J][] };

const FIELDS = ['block_number', 'hash', 'value', 'é', 'k"q', 'a\\b', 'tab\there'];
const UNKNOWN = ['x', 'method', '__proto__', 'constructor', 'toString', 'z\u2028', 'ключ', '', ' ', 'data'];
/** Keys parsed objects would list first: seldom, they put the page outside the subset. */
const INDEX_LIKE = ['0', '1x', '42'];
const entryKey = fc.oneof({ weight: 40, arbitrary: fc.constantFrom(...FIELDS, ...UNKNOWN) }, { weight: 1, arbitrary: fc.constantFrom(...INDEX_LIKE) });
const AT = ['results', 'data'];

const numberText = fc
  .tuple(
    fc.boolean(),
    fc.oneof(fc.constant('0'), fc.stringMatching(/^[1-9][0-9]{0,24}$/)),
    fc.option(fc.stringMatching(/^[0-9]{1,6}$/)),
    fc.option(fc.tuple(fc.constantFrom('e', 'E'), fc.constantFrom('', '+', '-'), fc.stringMatching(/^[0-9]{1,3}$/))),
  )
  .map(([neg, int, frac, exp]) => `${neg ? '-' : ''}${int}${frac !== null ? `.${frac}` : ''}${exp ? exp.join('') : ''}`);

const text = fc.oneof(
  fc.string(),
  fc.string({ unit: binaryUnit }),
  fc.stringMatching(/^0x[0-9a-fA-F]{0,66}$/),
  fc.stringMatching(/^-?[0-9]{1,40}$/),
  fc.constantFrom('', '"', '\\', '/', '\u2028', '\u0000', '\u001f', '\u007f', 'é', '漢字', '\ud83d\ude00', '\ud800', '\udfff x', '2024-03-01T00:00:12Z'),
);

const str = text.map((s): J => ({ t: 'str', s }));
const leaf: fc.Arbitrary<J> = fc.oneof(
  { weight: 4, arbitrary: str },
  { weight: 2, arbitrary: numberText.map((t): J => ({ t: 'num', text: t })) },
  { weight: 1, arbitrary: fc.constantFrom<J>({ t: 'lit', text: 'true' }, { t: 'lit', text: 'false' }, { t: 'lit', text: 'null' }) },
);
const { value } = fc.letrec<{ value: J }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    leaf,
    fc.array(tie('value'), { maxLength: 3 }).map((items): J => ({ t: 'arr', items })),
    fc
      .array(fc.tuple(fc.oneof(fc.constantFrom(...FIELDS, ...UNKNOWN, ...INDEX_LIKE), fc.string()), tie('value')), { maxLength: 3 })
      .map((members): J => ({ t: 'obj', members })),
  ),
}));

/** A declared field's value: mostly strings and nulls, as listings have them. */
const fieldValue = fc.oneof(
  { weight: 6, arbitrary: str },
  { weight: 2, arbitrary: fc.constant<J>({ t: 'lit', text: 'null' }) },
  { weight: 2, arbitrary: value },
);

interface Entry {
  members: [string, J][];
  /** Whether some key is repeated (then the page is outside the subset). */
  repeated: boolean;
}

const entry: fc.Arbitrary<Entry> = fc
  .tuple(
    fc.uniqueArray(entryKey, { maxLength: 9 }),
    fc.array(fieldValue, { minLength: 9, maxLength: 9 }),
    fc.oneof({ weight: 30, arbitrary: fc.constant(-1) }, { weight: 1, arbitrary: fc.nat(8) }),
  )
  .map(([keys, values, dup]) => {
    const members = keys.map((k, i): [string, J] => [k, values[i]!]);
    const repeated = dup >= 0 && dup < members.length;
    if (repeated) members.push([members[dup]![0], values[(dup + 1) % 9]!]);
    return { members, repeated };
  });

interface Page {
  body: J;
  /** Whether the page is within what the scanner takes. */
  inSubset: boolean;
}

const page: fc.Arbitrary<Page> = fc
  .tuple(
    fc.array(fc.oneof({ weight: 60, arbitrary: entry }, { weight: 1, arbitrary: leaf }), { maxLength: 6 }),
    fc.array(fc.tuple(fc.constantFrom('count', 'token_name', 'next', 'data2', 'items'), value), { maxLength: 3 }),
    fc.array(fc.tuple(fc.constantFrom('status', 'message', 'meta', 'result'), value), { maxLength: 3 }),
    fc.nat(3),
    fc.nat(3),
    fc.oneof({ weight: 15, arbitrary: fc.constant('none') }, { weight: 1, arbitrary: fc.constantFrom('results', 'data') }),
  )
  .map(([items, beside, around, dataAt, resultsAt, repeatPath]) => {
    let inSubset = true;
    const list: J = {
      t: 'arr',
      items: items.map((it) => {
        if ('repeated' in it) {
          if (it.repeated) inSubset = false;
          // Parsed objects list array-index keys first: unknown keys like them are outside the subset.
          if (it.members.some(([k]) => !FIELDS.includes(k) && /^[0-9]/.test(k))) inSubset = false;
          return { t: 'obj', members: it.members };
        }
        inSubset = false;
        return it;
      }),
    };
    const results: [string, J][] = [...beside];
    results.splice(Math.min(dataAt, results.length), 0, ['data', list]);
    if (repeatPath === 'data') {
      results.push(['data', { t: 'arr', items: [] }]);
      inSubset = false;
    }
    const top: [string, J][] = [...around];
    top.splice(Math.min(resultsAt, top.length), 0, ['results', { t: 'obj', members: results }]);
    if (repeatPath === 'results') {
      top.push(['results', { t: 'obj', members: [['data', { t: 'arr', items: [] }]] }]);
      inSubset = false;
    }
    return { body: { t: 'obj', members: top }, inSubset };
  });

const SHORT: Record<string, string> = { '"': '\\"', '\\': '\\\\', '\b': '\\b', '\f': '\\f', '\n': '\\n', '\r': '\\r', '\t': '\\t' };
const WHITESPACE = [' ', '\n', '\t', '\r', '  \r\n  '];

/** Writes JSON text: `rnd` decides whitespace between tokens and which characters are escaped (and how). */
function write(j: J, rnd: () => number): string {
  const ws = (): string => (rnd() < 0.25 ? WHITESPACE[Math.floor(rnd() * WHITESPACE.length)]! : '');
  const quote = (s: string): string => {
    let out = '"';
    for (const unit of s.split('')) {
      const code = unit.charCodeAt(0);
      if (SHORT[unit] !== undefined && (code < 0x20 || unit === '"' || unit === '\\' || rnd() < 0.5)) out += SHORT[unit];
      else if (code < 0x20 || rnd() < 0.08) {
        const hex = code.toString(16).padStart(4, '0');
        out += `\\u${rnd() < 0.5 ? hex : hex.toUpperCase()}`;
      } else if (unit === '/' && rnd() < 0.5) out += '\\/';
      else out += unit;
    }
    return `${out}"`;
  };
  const go = (v: J): string => {
    switch (v.t) {
      case 'str':
        return quote(v.s);
      case 'num':
      case 'lit':
        return v.text;
      case 'arr':
        return `[${ws()}${v.items.map((x) => go(x)).join(`${ws()},${ws()}`)}${ws()}]`;
      case 'obj':
        return `{${ws()}${v.members.map(([k, x]) => `${quote(k)}${ws()}:${ws()}${go(x)}`).join(`${ws()},${ws()}`)}${ws()}}`;
    }
  };
  return `${ws()}${go(j)}${ws()}`;
}

/** The bytes at `shift` (0-3) into a fresh buffer: the scanner reads whole 32-bit words, whatever the alignment. */
function shifted(bytes: Buffer, shift: number): Buffer {
  const out = Buffer.alloc(bytes.length + 3);
  bytes.copy(out, shift);
  return out.subarray(shift, shift + bytes.length);
}

const dig = (v: unknown, at: readonly string[]): unknown =>
  at.reduce((o, k) => (o !== null && typeof o === 'object' ? (o as Record<string, unknown>)[k] : undefined), v);

/** Everything a scan says, checked against JSON.parse of the same bytes. */
function checkAgainstParse(bytes: Buffer, scan: ScannedList): void {
  const parsed: unknown = JSON.parse(bytes.toString('utf8')); // throws if the scanner took what JSON.parse refuses
  const list = dig(parsed, AT) as Record<string, unknown>[];
  expect(Array.isArray(list)).toBe(true);
  expect(scan.count).toBe(list.length);
  expect(scan.parse()).toEqual(list);
  // The envelope around the list, parsed from the text with `[]` in its place.
  const envelope = JSON.parse(scan.envelopeText()) as Record<string, unknown>;
  (dig(parsed, AT.slice(0, -1)) as Record<string, unknown>)[AT.at(-1)!] = [];
  expect(envelope).toEqual(parsed);
  const unknown = new Map<string, number>();
  list.forEach((e, i) => {
    expectBe(e !== null && typeof e === 'object' && !Array.isArray(e), true);
    scan.fields.forEach((f, fi) => {
      const own = Object.hasOwn(e, f);
      const v = own ? e[f] : undefined;
      const tag = scan.tag(i, fi);
      expectBe(tag, !own ? ABSENT : v === null ? NULL : typeof v === 'string' ? tag : OTHER);
      if (typeof v === 'string') {
        if (tag !== STRING && tag !== ESCAPED) expect([STRING, ESCAPED]).toContain(tag);
        if (tag === STRING) {
          const content = bytes.subarray(scan.valueStart(i, fi), scan.valueEnd(i, fi));
          expectBe(content.includes(0x5c), false);
          expectBe(content.toString('utf8'), v);
        }
      }
      expectEqual(scan.value(i, fi), v);
    });
    for (const k in e) if (!scan.fields.includes(k)) unknown.set(k, (unknown.get(k) ?? 0) + 1);
  });
  expect(scan.unknown.map((u) => [u.name, u.entries])).toEqual([...unknown]);
}

describe('list scanner', () => {
  it('agrees with JSON.parse on generated pages, and takes exactly those within its subset', () => {
    let scanned = 0;
    let refused = 0;
    fc.assert(
      fc.property(page, fc.integer(), fc.nat(3), ({ body, inSubset }, seed, shift) => {
        const bytes = shifted(Buffer.from(write(body, seeded(seed)), 'utf8'), shift);
        const scan = scanList(bytes, AT, FIELDS);
        expect(scan !== undefined, bytes.toString()).toBe(inSubset);
        if (scan) {
          scanned++;
          checkAgainstParse(bytes, scan);
        } else {
          refused++;
          expect(() => JSON.parse(bytes.toString('utf8'))).not.toThrow(); // generated pages are all valid JSON
        }
      }),
      { numRuns: 1500, seed: 11 },
    );
    expect(scanned).toBeGreaterThan(600);
    expect(refused).toBeGreaterThan(100);
  });

  it('never takes a body JSON.parse refuses, and says the truth of every mutated body it takes', () => {
    const INTERESTING = [
      0x22, 0x5c, 0x2c, 0x3a, 0x7b, 0x7d, 0x5b, 0x5d, 0x20, 0x0a, 0x00, 0x1f, 0x30, 0x2d, 0x2b, 0x2e, 0x65, 0x75, 0x6e, 0x80, 0xc3, 0xff, 0x2f,
    ];
    const mutation = fc.tuple(fc.constantFrom('truncate', 'delete', 'insert', 'replace'), fc.nat(), fc.constantFrom(...INTERESTING));
    let tookMutated = 0;
    let parseRefused = 0;
    fc.assert(
      fc.property(page, fc.integer(), fc.array(mutation, { minLength: 1, maxLength: 3 }), fc.nat(3), ({ body }, seed, mutations, shift) => {
        let bytes: Buffer = Buffer.from(write(body, seeded(seed)), 'utf8');
        for (const [kind, where, byte] of mutations) {
          const at = bytes.length === 0 ? 0 : where % bytes.length;
          if (kind === 'truncate') bytes = bytes.subarray(0, at);
          else if (kind === 'delete') bytes = Buffer.concat([bytes.subarray(0, at), bytes.subarray(at + 1)]);
          else if (kind === 'insert') bytes = Buffer.concat([bytes.subarray(0, at), Buffer.from([byte]), bytes.subarray(at)]);
          else if (bytes.length > 0) (bytes = Buffer.from(bytes))[at] = byte;
        }
        bytes = shifted(bytes, shift);
        let parses = true;
        try {
          JSON.parse(bytes.toString('utf8'));
        } catch {
          parses = false;
          parseRefused++;
        }
        const scan = scanList(bytes, AT, FIELDS);
        if (!parses) expect(scan).toBeUndefined();
        if (scan) {
          tookMutated++;
          checkAgainstParse(bytes, scan);
        }
      }),
      { numRuns: 4000, seed: 12 },
    );
    expect(parseRefused).toBeGreaterThan(1000);
    expect(tookMutated).toBeGreaterThan(100);
  });

  it('reads every JSON number form as JSON.parse does, and refuses what JSON.parse refuses', () => {
    const good = ['0', '-0', '1', '-1', '10', '1.5', '-0.0', '0e0', '0E+0', '1e-5', '1E400', '-12.340e+10', '123456789012345678901234567890', '5e-324'];
    const bad = ['01', '-', '+1', '1.', '.5', '1e', '1e+', '0x10', 'NaN', 'Infinity', '- 1', '1.e3', '00', '-01', '1..2', '1e5.5'];
    for (const n of good) {
      const bytes = Buffer.from(`{"results":{"data":[{"value":${n},"x":${n}}]},"n":${n}}`);
      const scan = scanList(bytes, AT, ['value'])!;
      expect(scan, n).toBeDefined();
      expect(scan.tag(0, 0)).toBe(OTHER);
      checkAgainstParse(bytes, scan);
    }
    for (const n of bad) {
      for (const body of [`{"results":{"data":[{"value":${n}}]}}`, `{"results":{"data":[{"x":${n}}]}}`, `{"n":${n},"results":{"data":[]}}`]) {
        expect(() => JSON.parse(body), body).toThrow();
        expect(scanList(Buffer.from(body), AT, ['value']), body).toBeUndefined();
      }
    }
  });

  it('refuses what it does not take, and leaves the body to JSON.parse', () => {
    const refused = [
      '\ufeff{"results":{"data":[]}}', // a byte order mark
      '[{"results":{"data":[]}}]',
      '{"results":{"data":{}}}',
      '{"results":{"data":[1]}}',
      '{"results":{"data":[[]]}}',
      '{"results":{"data":null}}',
      '{"results":[]}',
      '{"results":{}}',
      '{"results":{"data":[]},"results":{"data":[]}}',
      '{"results":{"data":[{"hash":"a","hash":"b"}]}}',
      '{"results":{"data":[{"x":1,"x":2}]}}',
      '{"results":{"data":[{"h\\u0061sh":"a","hash":"b"}]}}', // the same key, once escaped
      '{"results":{"data":[{"7":1}]}}',
      '{"results":{"data":[]}} x',
      '{"results":{"data":[{"hash":"a\u0001"}]}}',
      '{"results":{"data":[{"hash":"\\x"}]}}',
      '{"results":{"data":[{"hash":"\\u12"}]}}',
      `{"results":{"data":[{"x":${'['.repeat(300)}${']'.repeat(300)}}]}}`,
    ];
    for (const body of refused) expect(scanList(Buffer.from(body), AT, ['hash']), body).toBeUndefined();
    // The key before was `k"q` (escaped): the same bytes unescaped are no key at all.
    expect(scanList(Buffer.from('{"results":{"data":[{"k\\"q":"a"},{"k"q":"b"}]}}'), AT, ['k"q'])).toBeUndefined();
    // Not valid UTF-8: JSON.parse would read replacement characters.
    expect(scanList(Buffer.concat([Buffer.from('{"results":{"data":[{"hash":"'), Buffer.from([0xff]), Buffer.from('"}]}}')]), AT, ['hash'])).toBeUndefined();
    // An escaped key names its field; nesting up to the limit is fine; duplicates inside other values are JSON.parse's business.
    for (const body of [
      '{"results":{"d\\u0061ta":[{"h\\u0061sh":"0x\\u0041b","x":{"y":1,"y":2}}]},"meta":{"a":1,"a":2}}',
      `{"results":{"data":[{"x":${'['.repeat(200)}${']'.repeat(200)}}]}}`,
    ]) {
      const bytes = Buffer.from(body);
      const scan = scanList(bytes, AT, ['hash'])!;
      expect(scan, body).toBeDefined();
      checkAgainstParse(bytes, scan);
    }
  });

  it('parseBody: the scanned envelope, else the whole body parsed, else undefined', () => {
    const scan = { at: AT, fields: ['hash'] };
    const body = Buffer.from('{"status":"200","results":{"count":"1","data":[{"hash":"0xab"}]}}');
    const scanned = parseBody(body, scan)!;
    expect(scanned.list?.count).toBe(1);
    expect(scanned.body).toEqual({ status: '200', results: { count: '1', data: [] } });
    expect(parseBody(body, { ...scan, maxBytes: body.length - 1 })).toEqual({ body: JSON.parse(body.toString()) });
    expect(parseBody(body)).toEqual({ body: JSON.parse(body.toString()) });
    const repeated = Buffer.from('{"results":{"data":[{"hash":"a","hash":"b"}]}}');
    expect(parseBody(repeated, scan)).toEqual({ body: { results: { data: [{ hash: 'b' }] } } });
    expect(parseBody(Buffer.from('{"results":'), scan)).toBeUndefined();
  });
});
