import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { columnSource, type ColumnKind } from '../../src/datasets/column.js';
import type { DatasetDef } from '../../src/datasets/dataset.js';
import { erc20_transfers } from '../../src/datasets/erc20_transfers.js';
import { event_logs } from '../../src/datasets/event_logs.js';
import { transactions } from '../../src/datasets/transactions.js';
import { scanList } from '../../src/extract/scan.js';
import { REFUSED, UPPER_CASE_HEX, canonicalHex } from '../../src/transform/convert.js';
import { KINDS } from '../../src/transform/kinds.js';
import { OrdinalState, RowTransformer, type AcceptedPage, type PageContext } from '../../src/transform/rows.js';
import { binaryUnit } from '../helpers/arbitraries.js';
import { expectBe, expectEqual } from '../helpers/checks.js';

/**
 * Pages accepted from a scan of their bytes (`acceptScanned`) are exactly those `acceptRaw` accepts from the
 * parsed entries, with the same staged constants, ordinals and unknown-field counts. Two halves: each byte
 * acceptor says what its string acceptor says (property test), and whole listings go through both paths
 * side by side.
 */

const hexOf = (n: number) => fc.stringMatching(new RegExp(`^0[xX][0-9a-fA-FgG]{${n}}$`));
/** Near misses around what each kind accepts, and anything at all. */
const CANDIDATES: Record<string, fc.Arbitrary<string>> = {
  address: fc.oneof(hexOf(40), hexOf(39), hexOf(41), fc.stringMatching(/^0x[0-9a-f]{40}$/), fc.stringMatching(/^0x[0-9a-fA-F]{40}$/)),
  hash: fc.oneof(hexOf(64), hexOf(63), fc.stringMatching(/^0x[0-9a-fA-F]{64}$/)),
  hex: fc.oneof(
    fc.stringMatching(/^0[xX][0-9a-fA-FgG]{0,70}$/),
    fc.stringMatching(/^0x[0-9a-f]{0,10}$/),
    fc.stringMatching(/^0x[0-9a-fA-F]{1,10}$/),
    fc.constantFrom('0', '0x', 'x'),
  ),
  bigint: fc.oneof(fc.stringMatching(/^-?[0-9]{0,20}$/), fc.stringMatching(/^[-+0-9 ]{0,4}$/)),
  amount: fc.oneof(fc.stringMatching(/^0{0,2}[0-9]{0,40}$/), fc.stringMatching(/^[1-9][0-9]{36,38}$/), fc.constantFrom('0', '00', '-1')),
  timestamp: fc.oneof(
    fc
      .date({ min: new Date('0900-01-01T00:00:00Z'), max: new Date('2999-12-31T23:59:59Z'), noInvalidDate: true })
      .map((d) => d.toISOString().replace(/\.000Z$/, 'Z')),
    fc.stringMatching(/^[0-9]{4}-[0-3][0-9]-[0-3][0-9][T t][0-2][0-9]:[0-6][0-9]:[0-6][0-9](\.[0-9]{0,10})?[Zz]?$/),
    fc.constantFrom('2024-02-29T00:00:00Z', '2023-02-29T00:00:00Z', '2000-02-29T23:59:59.123456789Z', '1900-02-29T00:00:00Z', '0999-01-01T00:00:00Z'),
    // Each part at and around its bounds.
    fc
      .record({
        y: fc.constantFrom('0999', '1000', '1900', '2000', '2023', '2024', '9999'),
        mo: fc.integer({ min: 0, max: 13 }),
        d: fc.constantFrom(0, 1, 15, 28, 29, 30, 31, 32),
        t: fc.constantFrom('T', 'T', 'T', 't', ' '),
        h: fc.integer({ min: 0, max: 25 }),
        mi: fc.constantFrom(0, 1, 30, 59, 60, 61),
        s: fc.constantFrom(0, 1, 30, 59, 60, 61),
        frac: fc.oneof(fc.constant(''), fc.stringMatching(/^\.[0-9]{0,10}$/)),
        z: fc.constantFrom('Z', 'Z', 'Z', 'z', '', '+00:00'),
      })
      .map(({ y, mo, d, t, h, mi, s, frac, z }) => {
        const p2 = (n: number) => String(n).padStart(2, '0');
        return `${y}-${p2(mo)}-${p2(d)}${t}${p2(h)}:${p2(mi)}:${p2(s)}${frac}${z}`;
      }),
  ),
  bool: fc.stringMatching(/^[01a]{0,2}$/),
  text: fc.string(),
};
/** Characters the byte acceptors must not mistake for ASCII ones. */
const ODD = fc.constantFrom('٣', '０', 'é', 'Ｚ', '\u2028', '\ud83d\ude00', '\u007f', 'x', '-', '0');

/** Mutations of a candidate: a character replaced, inserted or removed. */
const candidate = (kind: string): fc.Arbitrary<string> =>
  fc.oneof(
    { weight: 3, arbitrary: CANDIDATES[kind]! },
    {
      weight: 1,
      arbitrary: fc.tuple(CANDIDATES[kind]!, fc.nat(), fc.constantFrom('replace', 'insert', 'delete'), ODD).map(([s, at, how, c]) => {
        const i = s.length === 0 ? 0 : at % s.length;
        return how === 'replace' ? s.slice(0, i) + c + s.slice(i + 1) : how === 'insert' ? s.slice(0, i) + c + s.slice(i) : s.slice(0, i) + s.slice(i + 1);
      }),
    },
    { weight: 1, arbitrary: fc.string({ unit: binaryUnit, maxLength: 70 }) },
  );

/** What a JSON string without escapes can hold: no quote, backslash or control character, well-formed UTF-16. */
const unescapable = (s: string): boolean => !/["\\\u0000-\u001f]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(s);

describe('byte acceptors', () => {
  // int_array accepts lists only, never a string: a dataset with such a column is never accepted from a scan.
  const forms = (Object.keys(KINDS) as ColumnKind[]).flatMap((k) => {
    const r = KINDS[k].received;
    return r ? [[k, r.accept] as const] : [];
  });
  for (const [kind, accept] of forms.filter(([k]) => k !== 'int_array')) {
    it(`${kind}: says of a string's UTF-8 bytes what the string acceptor says of the string`, () => {
      const acceptBytes = KINDS[kind].received!.acceptBytes!;
      expect(acceptBytes).toBeDefined();
      let yes = 0;
      let no = 0;
      let uppers = 0;
      fc.assert(
        fc.property(candidate(kind), fc.uint8Array({ maxLength: 3 }), fc.uint8Array({ maxLength: 3 }), (s, before, after) => {
          if (!unescapable(s)) return;
          // Somewhere inside a larger buffer, as in a body.
          const bytes = Buffer.concat([before, Buffer.from(s, 'utf8'), after]);
          const got = acceptBytes(bytes, before.length, bytes.length - after.length);
          expectBe(got !== REFUSED, accept(s), () => JSON.stringify(s));
          // Upper-case hex is said of exactly the accepted hex values whose canonical form differs from their text.
          const upper = got !== REFUSED && KINDS[kind].received!.canonical === canonicalHex && canonicalHex(s) !== s;
          expectBe((got & UPPER_CASE_HEX) !== 0, upper, () => JSON.stringify(s));
          if (upper) uppers++;
          if (got) yes++;
          else no++;
        }),
        { numRuns: 3000, seed: 5 },
      );
      expect(yes, 'the generators reach accepted values').toBeGreaterThan(300);
      if (kind !== 'text') expect(no, 'and refused ones').toBeGreaterThan(300);
      if (KINDS[kind].received!.canonical === canonicalHex) expect(uppers, 'and upper-case hex').toBeGreaterThan(100);
    });
  }
});

/** A JSON string, some characters written as `\u` escapes when `escape` says so. */
function quote(s: string, escape: (i: number) => boolean): string {
  const json = JSON.stringify(s);
  let out = '';
  let i = 0;
  for (const unit of json.slice(1, -1).split('')) {
    out += escape(i++) && unit !== '\\' ? `\\u${unit.charCodeAt(0).toString(16).padStart(4, '0')}` : unit;
  }
  return `"${out}"`;
}

type Value = { absent: true } | { json: string };

/** A valid value of each kind, as the explorer sends it. */
const VALID: Record<string, fc.Arbitrary<string>> = {
  address: fc.stringMatching(/^0x[0-9a-fA-F]{40}$/),
  hash: fc.stringMatching(/^0x[0-9a-fA-F]{64}$/),
  hex: fc.stringMatching(/^0x[0-9a-f]{0,16}$/),
  bigint: fc.stringMatching(/^[1-9][0-9]{0,8}$/),
  amount: fc.oneof(fc.stringMatching(/^[1-9][0-9]{0,30}$/), fc.constant('0')),
  timestamp: fc.constantFrom('2024-03-01T00:00:12Z', '2024-02-29T23:59:59.5Z'),
  bool: fc.constantFrom('0', '1'),
  text: fc.oneof(fc.string(), fc.constantFrom('Transfer', 'Ünïcødé "T"', 'tab\there')),
};

/** One entry column's value: mostly valid; sometimes missing, null, escaped, a number or a near miss. */
const valueOf = (kind: string, nullable: boolean): fc.Arbitrary<Value> =>
  fc.oneof(
    { weight: 120, arbitrary: VALID[kind]!.map((s) => ({ json: JSON.stringify(s) })) },
    { weight: nullable ? 10 : 1, arbitrary: fc.constantFrom<Value>({ absent: true }, { json: 'null' }) },
    { weight: 2, arbitrary: fc.tuple(VALID[kind]!, fc.integer()).map(([s, seed]) => ({ json: quote(s, (i) => (i * 7 + seed) % 5 === 0) })) },
    { weight: 1, arbitrary: fc.constantFrom<Value>({ json: '7' }, { json: '-0.5e3' }, { json: 'true' }, { json: '["1"]' }, { json: '{"a":"1"}' }) },
    { weight: 1, arbitrary: candidate(kind).map((s) => ({ json: JSON.stringify(s) })) },
  );

const UNKNOWN_KEYS = ['method_id', 'extra', '__proto__', 'ключ', 'z\u2028'];

/** Entries of a dataset as JSON text (group keys monotonic, so ordinals can be numbered), and extra keys. */
function listing(def: DatasetDef): fc.Arbitrary<string[]> {
  const columns = def.columns.filter((c) => !c.source?.startsWith('$'));
  const entry = fc.tuple(fc.tuple(...columns.map((c) => valueOf(c.kind, c.nullable))), fc.subarray(UNKNOWN_KEYS), fc.nat(3), fc.boolean(), fc.integer());
  const tx = fc.array(entry, { minLength: 1, maxLength: 3 }).chain((entries) =>
    // Identical transfers of one transaction: copies of its first entry.
    fc.nat(2).map((copies) => [...entries, ...Array.from({ length: copies }, () => entries[0]!)]),
  );
  // Up to six transactions (up to 30 entries, in pages of one to nine): pages still cross groups and carry their
  // ordinals over; longer listings only repeated that per run (300 runs: about 900 pages per dataset).
  return fc.array(tx, { minLength: 1, maxLength: 6 }).map((txs) =>
    txs.flatMap((entries, t) =>
      entries.map(([values, extra, at, escapeKey, seed]) => {
        const members = columns.flatMap((c, i) => {
          let v = values[i]!;
          // The group of a transfer: newest block first, a transaction's entries together (unless a near miss is drawn).
          if (c.name === 'block_number' && 'json' in v && v.json.startsWith('"')) v = { json: `"${1000 - Math.floor(t / 2)}"` };
          if (c.name === 'transaction_index' && 'json' in v && v.json.startsWith('"')) v = { json: `"${9 - (t % 2)}"` };
          if ('absent' in v) return [];
          const key = escapeKey && i === seed % columns.length ? quote(c.name, (j) => j === 0) : JSON.stringify(c.name);
          return [`${key}:${v.json}`];
        });
        for (const k of extra) members.splice(at % (members.length + 1), 0, `${JSON.stringify(k)}:${seed % 2 ? '"x"' : '{"y":[1,null]}'}`);
        return `{${members.join(seed % 3 === 0 ? ' ,\n ' : ',')}}`;
      }),
    ),
  );
}

/** What a page gives in execute.ts: the accepted page (scanned or not), or the converted rows, or the error. */
function outcome(t: RowTransformer, entries: unknown[], page: PageContext, scanned: boolean): unknown {
  try {
    const fromScan = scanned ? t.acceptScanned(page) : undefined;
    const accepted = fromScan ?? t.acceptRaw(entries, page);
    // How each way says where upper-case hex is differs (checked apart: caseOfHex).
    if (accepted) return { accepted: { ...accepted, upperCaseHex: undefined, upperCaseSpans: undefined }, scanned: fromScan !== undefined, page: accepted };
    return { transformed: t.transform(entries, 'w', page) };
  } catch (e) {
    return { error: (e as Error).message };
  }
}

describe('pages accepted from a scan', () => {
  for (const def of [erc20_transfers, transactions, event_logs]) {
    it(`${def.name}: the same pages, constants, ordinals and unknown fields as from parsed entries`, () => {
      let fromScan = 0;
      let notFromScan = 0;
      let uppers = 0;
      fc.assert(
        fc.property(listing(def), fc.array(fc.integer({ min: 1, max: 9 }), { minLength: 1, maxLength: 3 }), (entryTexts, sizes) => {
          const a = new RowTransformer(def, { network: 'mainnet', snapshotDate: '2026-01-15' });
          const b = new RowTransformer(def, { network: 'mainnet', snapshotDate: '2026-01-15' });
          const fields = b.scanFields(def.endpoints[0]!)!;
          expect(fields).toBeDefined();
          const [oa, ob] = [new OrdinalState(), new OrdinalState()];
          for (let offset = 0, i = 0; offset < entryTexts.length; i++) {
            const texts = entryTexts.slice(offset, offset + sizes[i % sizes.length]!);
            const bytes = Buffer.from(`{"status":"200","message":"OK","results":{"count":"${entryTexts.length}","data":[${texts.join(',')}]}}`);
            const entries = (JSON.parse(bytes.toString()) as { results: { data: unknown[] } }).results.data;
            const list = scanList(bytes, ['results', 'data'], fields);
            expect(list).toBeDefined();
            const context = (ordinals: OrdinalState, withList: boolean): PageContext => ({
              scope: { address: '0x' + 'a'.repeat(40) },
              results: {},
              meta: { endpoint: def.endpoints[0]!.id },
              offset,
              ordinals,
              raw: { bytes, entriesAt: ['results', 'data'], entries, list: withList ? list : undefined },
            });
            const parsed = outcome(a, entries, context(oa, false), false) as { scanned?: boolean; page?: AcceptedPage };
            const viaScan = outcome(b, entries, context(ob, true), true) as { scanned?: boolean; page?: AcceptedPage };
            if (viaScan.scanned) {
              fromScan++;
              uppers += caseOfHex(def, bytes, viaScan.page!);
            } else notFromScan++;
            expectEqual({ ...viaScan, scanned: undefined, page: undefined }, { ...parsed, scanned: undefined, page: undefined });
            expectEqual([...b.unknownFields], [...a.unknownFields]);
            offset += texts.length;
          }
        }),
        { numRuns: 300, seed: 9 },
      );
      expect(fromScan, 'pages accepted from their scan').toBeGreaterThan(100);
      expect(notFromScan, 'pages left to the parsed entries').toBeGreaterThan(50);
      expect(uppers, 'upper-case hex values located').toBeGreaterThan(50);
    });
  }
});

/**
 * A page accepted from its scan says where its upper-case hex values are: lower-cased there (as staging does
 * in its copy), every hex value of the body is in canonical form, unless the page says it may not be; and
 * nothing else changed. Returns how many values were located.
 */
function caseOfHex(def: DatasetDef, bytes: Buffer, page: AcceptedPage): number {
  const spans = page.upperCaseSpans ?? [];
  const copy = Buffer.from(bytes);
  for (let k = 0; k < spans.length; k += 2) copy.write(copy.toString('latin1', spans[k], spans[k + 1]).toLowerCase(), spans[k]!, 'latin1');
  const before = (JSON.parse(bytes.toString()) as { results: { data: Record<string, unknown>[] } }).results.data;
  const after = (JSON.parse(copy.toString()) as { results: { data: Record<string, unknown>[] } }).results.data;
  const hexFields = new Set(
    def.columns.filter((c) => KINDS[c.kind].received?.canonical === canonicalHex && columnSource(c).from === 'entry').map((c) => columnSource(c).path[0]!),
  );
  before.forEach((entry, i) => {
    for (const [field, value] of Object.entries(entry)) {
      if (!hexFields.has(field) || typeof value !== 'string') expectEqual(after[i]![field], value, field);
      else if (!page.upperCaseHex) expectBe(after[i]![field], canonicalHex(value), field);
    }
  });
  return spans.length / 2;
}
