import fc from 'fast-check';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ColumnKind } from '../../src/datasets/column.js';
import { DATASETS } from '../../src/datasets/registry.js';
import { datasetShape, REJECTS_SHAPE } from '../../src/load/schema.js';
import { parseJob } from '../../src/pipeline/job.js';
import type { Logger } from '../../src/pipeline/log.js';
import { runJob } from '../../src/pipeline/run.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { Rejected } from '../../src/transform/convert.js';
import { KINDS, type ReceivedForm } from '../../src/transform/kinds.js';
import { MAX_RECEIVED_PAGE_BYTES, RowTransformer } from '../../src/transform/rows.js';
import { tempDir } from '../helpers/lake.js';
import { catalogFiles } from '../load/helpers.js';
import { demoDoc } from '../reliability/helpers.js';
import { startProxy, type Proxy } from '../reliability/proxy.js';

/**
 * Pages staged as received (typed by DuckDB from the body's bytes) must give exactly the lake that converting
 * every entry in JS gives. Two halves of one contract are checked: the acceptors only pass values whose
 * canonical form is what the SQL side computes from the text (property test), and whole runs of every
 * dataset, through a proxy that sends odd but valid forms, multi-line bodies, escapes and bad values, give
 * identical lakes both ways. A third way, pages accepted from a scan of their bytes (extract/scan.ts,
 * RowTransformer.acceptScanned), must give that same lake too (test/transform/scanned.test.ts ties its parts).
 */

const hex = (n: number) => fc.stringMatching(new RegExp(`^0x[0-9a-fA-F]{${n}}$`));
const CANDIDATES: Record<string, fc.Arbitrary<unknown>> = {
  address: fc.oneof(hex(40), hex(39), fc.string()),
  hash: fc.oneof(hex(64), hex(63), fc.string()),
  hex: fc.oneof(fc.stringMatching(/^0x[0-9a-fA-F]{0,20}$/), fc.string()),
  bigint: fc.oneof(fc.stringMatching(/^-?[0-9]{1,20}$/), fc.integer(), fc.string()),
  amount: fc.oneof(fc.stringMatching(/^[0-9]{1,40}$/), fc.bigInt({ min: 0n, max: 2n ** 256n - 1n }).map(String), fc.integer({ min: 0 }), fc.string()),
  timestamp: fc.oneof(
    fc
      .date({ min: new Date('0900-01-01T00:00:00Z'), max: new Date('2999-12-31T23:59:59Z'), noInvalidDate: true })
      .map((d) => d.toISOString().replace(/\.000Z$/, 'Z')),
    fc.stringMatching(/^\d{4}-[01]\d-[0-3]\dT[0-2]\d:[0-6]\d:[0-6]\d(\.\d{1,9})?(Z|[+-]\d\d:\d\d)$/),
    fc.string(),
  ),
  bool: fc.constantFrom('0', '1', 0, 1, true, false, 'true', ''),
  int_array: fc.oneof(
    fc.array(fc.stringMatching(/^[0-9]{1,10}$/), { maxLength: 6 }),
    fc.array(fc.oneof(fc.integer(), fc.string()), { maxLength: 4 }),
    fc.string(),
  ),
  text: fc.oneof(fc.string(), fc.integer(), fc.boolean()),
};

describe('acceptors', () => {
  const received = Object.entries(KINDS).flatMap(([k, spec]) => (spec.received ? [[k as ColumnKind, spec.received] as const] : []));
  it('every kind but json and double may be staged as received', () => {
    expect(received.map(([k]) => k)).toEqual(['address', 'hash', 'hex', 'bigint', 'amount', 'timestamp', 'bool', 'text', 'int_array']);
  });
  for (const [kind, form] of received as (readonly [ColumnKind, ReceivedForm])[]) {
    const accept = form.accept;
    it(`${kind}: an accepted value converts, to exactly what SQL computes from its text`, () => {
      let accepted = 0;
      fc.assert(
        fc.property(CANDIDATES[kind]!, (v) => {
          if (!accept(v)) return;
          accepted++;
          if (kind === 'bool') expect(['string', 'boolean']).toContain(typeof v);
          else if (kind === 'int_array') expect(Array.isArray(v)).toBe(true);
          else expect(typeof v).toBe('string');
          const converted = KINDS[kind].convert(v);
          expect(converted).not.toBeInstanceOf(Rejected);
          if (kind === 'amount') expect((converted as string).length).toBeLessThanOrEqual(38);
          expect(converted).toEqual(form.canonical(v));
        }),
        { numRuns: 2000, seed: 7 },
      );
      expect(accepted, 'the generators reach accepted values').toBeGreaterThan(100);
    });
  }
});

type Json = Record<string, unknown>;

/**
 * Alters listing pages on their way: odd but valid forms the converters handle and the acceptors refuse
 * (the page then goes the converters' way), text the SQL side must read exactly (escapes, quotes, non-ASCII,
 * U+2028), line breaks inside the body, and one bad value (a reject). Keyed by page so both runs see the same.
 */
function alter(url: URL, text: string): string {
  const offset = Number(url.searchParams.get('offset') ?? '0');
  const body = JSON.parse(text) as Json;
  const data = ((body.results as Json | undefined)?.data ?? body.data) as Json[] | undefined;
  if (!Array.isArray(data) || data.length < 4) return text;
  const p = url.pathname;
  if (p.endsWith('/transactions') && offset === 0) {
    data[0]!.value = `000${String(data[0]!.value ?? '1')}`; // leading zeros
    data[1]!.nonce = 7; // a JSON number where text is documented
    data[2]!.tx_message = 'quote " backslash \\ tab \t é 漢字 \u2028 end'; // escapes on the wire
    data[3]!.timestamp = String(data[3]!.timestamp).replace('Z', '+00:00'); // an offset
    data[4]!.gas_used = 21000; // a JSON number where a string is declared (the scan leaves it to the converters)
  }
  if (p.endsWith('/token-transfer/erc20') && offset === 0) {
    data[0]!.token_name = 'Ünïcødé "Token"';
    data[1]!.value = 'not-a-number'; // a reject
  }
  if (p.endsWith('/event-logs')) {
    data[0]!.data = String(data[0]!.data ?? '0x')
      .toUpperCase()
      .replace('0X', '0x'); // upper-case hex: lower-cased either way
    data[1]!.method = '\u0001ctl';
  }
  if (p.endsWith('/transactions') && offset === 1000) data[1]!.extra = { nested: [1, 'two'] }; // a field the schema does not know
  if (p.endsWith('/internal-transactions') && offset === 0) {
    // JSON booleans and lists, as the API sends them, staged as received: both values of a flag, an empty list.
    data[0]!.external_receiver = true;
    data[1]!.external_receiver = false;
    data[2]!.trace_address = [];
    data[3]!.trace_address = ['0', '12', '2147483647'];
  }
  if (p.endsWith('/transactions') && offset === 2000) data[5]!.block_hash = `0x${'ab'.repeat(31)}c`; // one bad value alone: a reject
  // Not scanned (a key parsed objects list first): converted, as a scan cannot vouch for its keys.
  if (p.endsWith('/transactions') && offset === 3000) data[2]!['7'] = 'x';
  // Every other altered page goes out pretty-printed: line breaks between tokens.
  let out = offset % 2000 === 0 ? JSON.stringify(body, null, 1) : JSON.stringify(body);
  if (p.endsWith('/transactions') && offset === 1000) {
    // Escapes in values the acceptors check (`0x` as `0\u0078`), and in a key: the same values once parsed.
    out = out.replace('"transaction_hash":"0x', '"transaction_hash":"0\\u0078').replace('"block_hash":"0x', '"block_h\\u0061sh":"0x');
  }
  // An entry that repeats a key the dataset reads: JSON.parse keeps the last value, DuckDB's reader refuses the
  // object. Staged as received, it failed the commit; the page must go through the converters (both ways).
  // Only in the windows of a few addresses, so that most pages still go as received.
  if (p.endsWith('/transactions') && offset === 1000 && /\/accounts\/0x[01]/.test(p)) out = out.replace('"nonce":', '"nonce":"12345","nonce":');
  return out;
}

let sim: RunningSimulator;
let proxy: Proxy;
let dir: string;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  sim = await startSimulator({ seed: 1, scale: 'small' });
  ({ dir, cleanup } = await tempDir('chainlake-received-'));
  proxy = await startProxy(sim, (url, status, body) => (status === 200 ? { body: alter(url, body) } : undefined));
});

afterAll(async () => {
  await proxy?.close();
  await sim?.close();
  await cleanup?.();
});

/** Every table of a lake as sorted JSON lines of all columns but the run's own, with the column types. */
async function contents(lake: string): Promise<Record<string, { types: string; rows: string[] }>> {
  const instance = await DuckDBInstance.create(':memory:');
  const conn = await instance.connect();
  const out: Record<string, { types: string; rows: string[] }> = {};
  try {
    await conn.run("SET TimeZone = 'UTC'");
    const current = await catalogFiles(lake);
    for (const t of [...Object.values(DATASETS).map(datasetShape), REJECTS_SHAPE]) {
      const files = current.filter((f) => f.path.startsWith(`main/${t.name}/`)).map((f) => `'${path.join(lake, f.path)}'`);
      if (files.length === 0) continue;
      const src = `read_parquet([${files.join(', ')}])`;
      let types: string;
      try {
        types = (await conn.runAndReadAll(`DESCRIBE SELECT * FROM ${src}`))
          .getRowsJS()
          .map((r) => `${String(r[0])} ${String(r[1])}`)
          .join(', ');
      } catch {
        continue; // no file: the table is absent from both or the comparison of keys fails below
      }
      const rows = (await conn.runAndReadAll(`SELECT to_json(r)::VARCHAR FROM (SELECT * EXCLUDE (_run_id, _ingested_at) FROM ${src}) r`))
        .getRowsJS()
        .map((r) => String(r[0]))
        .sort();
      out[t.name] = { types, rows };
    }
  } finally {
    conn.closeSync();
    instance.closeSync();
  }
  return out;
}

describe('pages staged as received', () => {
  it('give exactly the lake that converting every entry gives, over every dataset, scanned or parsed', async () => {
    const ways = {
      converted: { stageReceived: false, scanLists: false },
      received: { stageReceived: true, scanLists: false },
      scanned: { stageReceived: true, scanLists: true },
    };
    const counts: Record<string, { converted: number; received: number; scanned: number }> = {};
    const unknownFields: Record<string, unknown> = {};
    const doc = await demoDoc();
    // Every dataset of the demo job, but transactions and ERC-20 transfers of two of its addresses: one whose
    // transactions run to a page at offset 3,000 (4,864 rows), one of the /0x[01]/ windows (2,464 rows). Each way
    // is a whole run; the other four addresses only added rows to convert.
    const datasets = doc.datasets as Record<string, { addresses?: string[] }>;
    const two = datasets.transactions!.addresses!.filter((a) => a.startsWith('0x347c') || a.startsWith('0x0067'));
    expect(two).toHaveLength(2);
    doc.datasets = { ...datasets, transactions: { addresses: two }, erc20_transfers: { addresses: two } };
    const lakes: Record<string, string> = {};
    for (const [way, { stageReceived, scanLists }] of Object.entries(ways)) {
      const lake = (lakes[way] = path.join(dir, way));
      const n = (counts[way] = { converted: 0, received: 0, scanned: 0 });
      const logger: Logger = {
        log(_level, event, _message, fields) {
          if (event !== 'window.done' || !fields) return;
          n.received += Number(fields.receivedRows);
          n.scanned += Number(fields.scannedRows);
          n.converted += Number(fields.rows) - Number(fields.receivedRows);
        },
      };
      const job = parseJob({ ...doc, lake }, 'received-test', process.env);
      const report = await runJob(job, {
        simulator: { urls: proxy.urls, apiKey: sim.apiKey },
        now: () => new Date('2026-01-15T12:00:00Z'),
        stageReceived,
        transport: { scanLists },
        logger,
      });
      expect(report.errors).toEqual([]);
      expect(report.status).toBe('complete');
      unknownFields[way] = report.unknownFields;
    }
    const a = await contents(lakes.converted!);
    expect(Object.keys(a).length).toBeGreaterThanOrEqual(19);
    for (const way of ['received', 'scanned']) {
      const b = await contents(lakes[way]!);
      expect(Object.keys(b).sort(), way).toEqual(Object.keys(a).sort());
      for (const name of Object.keys(a)) {
        expect(b[name]!.types, `${way} ${name}`).toBe(a[name]!.types);
        expect(b[name]!.rows.length, `${way} ${name}`).toBe(a[name]!.rows.length);
        expect(b[name]!.rows, `${way} ${name}`).toEqual(a[name]!.rows);
      }
    }
    // Every way was taken: most pages as received (from their scan where scanned), the altered ones converted.
    // A body the scanner refuses (a key parsed objects list first, a repeated key) is converted either way: only
    // a scan shows that no key repeats. Internal transactions (a list column) are never accepted from a scan,
    // but from their parsed entries.
    expect(counts.converted!.received).toBe(0);
    expect(counts.received!.received).toBeGreaterThan(3_500); // 4,045 rows of this job
    expect(counts.received!.converted).toBeGreaterThan(0);
    expect(counts.received!.scanned).toBe(0);
    // The page with an unlisted field (`extra`, 1,000 rows) is accepted from its parsed entries, which give each
    // entry's extra column; the scan only counts unlisted fields. With the internal transactions: 1,265 rows.
    expect(counts.scanned!.scanned).toBeGreaterThan(2_500); // 2,780
    expect(counts.scanned!.received - counts.scanned!.scanned).toBeLessThan(1_500);
    expect(counts.scanned!.received).toBe(counts.received!.received);
    expect(counts.scanned!.received).toBeGreaterThan(counts.scanned!.scanned);
    expect(unknownFields.scanned).toEqual(unknownFields.received);
    expect(unknownFields.scanned).toEqual(unknownFields.converted);
    expect(unknownFields.scanned).toHaveProperty('transactions', ['7', 'extra']);
    // The altered values landed as the converters read them.
    expect(a._rejects!.rows.some((r) => r.includes('not-a-number'))).toBe(true);
    expect(a.transactions!.rows.some((r) => r.includes('quote \\" backslash'))).toBe(true);
  }, 360_000);
});

describe('acceptRaw', () => {
  const t = new RowTransformer(DATASETS.event_logs!, { network: 'mainnet', snapshotDate: '2026-01-15' });
  const entry = {
    timestamp: '2024-03-01T00:00:12Z',
    transaction_hash: `0x${'ab'.repeat(32)}`,
    log_index: '3',
    address: `0x${'cd'.repeat(20)}`,
    topic_0: `0x${'ef'.repeat(32)}`,
  };
  const entries = [entry, { ...entry, log_index: '4' }];
  const json = JSON.stringify({ results: { data: entries } });
  /** The page of `entries` whose body is `text`, padded with spaces to `bytes`. */
  const page = (text = json, bytes = 0) => ({
    scope: {},
    results: {},
    offset: 0,
    raw: { bytes: Buffer.from(text.padEnd(bytes, ' ')), entriesAt: ['results', 'data'], entries },
  });

  it('sends a page larger than DuckDB reads comfortably in one line through the converters', () => {
    expect(t.acceptRaw(entries, page(json, 1024))?.rows).toBe(2);
    expect(t.acceptRaw(entries, page(json, MAX_RECEIVED_PAGE_BYTES + 1))).toBeUndefined();
    // The page's own entries only: a list cut from the body (the pager's probe reuse) is not the body.
    expect(t.acceptRaw(entries.slice(0, 1), page(json, 1024))).toBeUndefined();
  });

  it('sends a body that repeats a key (in an entry or around the list) through the converters', () => {
    expect(t.acceptRaw(entries, page(json))?.rows).toBe(2);
    // JSON.parse of each gives these very entries (the last value wins); DuckDB would refuse the objects.
    expect(t.acceptRaw(entries, page(json.replace('"log_index":"4"', '"log_index":"9","log_index":"4"')))).toBeUndefined();
    expect(t.acceptRaw(entries, page(json.replace('{"data"', '{"data":[],"data"')))).toBeUndefined();
    // A key the dataset does not read, repeated: refused as well (the scan does not tell them apart).
    expect(t.acceptRaw(entries, page(json.replace('"log_index":"4"', '"x":1,"x":2,"log_index":"4"')))).toBeUndefined();
  });
});
