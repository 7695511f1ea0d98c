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
import { ACCEPTORS, CONVERTERS, Rejected, receivedCanonical } from '../../src/transform/convert.js';
import { MAX_RECEIVED_PAGE_BYTES, RowTransformer } from '../../src/transform/rows.js';
import { tempDir } from '../helpers/lake.js';
import { demoDoc } from '../reliability/helpers.js';
import { startProxy, type Proxy } from '../reliability/proxy.js';

/**
 * Pages staged as received (typed by DuckDB from the body's bytes) must give exactly the lake that converting
 * every entry in JS gives. Two halves of one contract are checked: the acceptors only pass values whose
 * canonical form is what the SQL side computes from the text (property test), and whole runs of every
 * dataset, through a proxy that sends odd but valid forms, multi-line bodies, escapes and bad values, give
 * identical lakes both ways.
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
  text: fc.oneof(fc.string(), fc.integer(), fc.boolean()),
};

describe('acceptors', () => {
  for (const [kind, accept] of Object.entries(ACCEPTORS) as [ColumnKind, (v: unknown) => boolean][]) {
    it(`${kind}: an accepted value converts, to exactly what SQL computes from its text`, () => {
      let accepted = 0;
      fc.assert(
        fc.property(CANDIDATES[kind]!, (v) => {
          if (!accept(v)) return;
          accepted++;
          expect(typeof v).toBe('string');
          const converted = CONVERTERS[kind](v);
          expect(converted).not.toBeInstanceOf(Rejected);
          if (kind === 'amount') expect((converted as string).length).toBeLessThanOrEqual(38);
          expect(converted).toEqual(receivedCanonical(kind, v as string));
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
  // Every other altered page goes out pretty-printed: line breaks between tokens.
  return offset % 2000 === 0 ? JSON.stringify(body, null, 1) : JSON.stringify(body);
}

let sim: RunningSimulator;
let proxy: Proxy;
let dir: string;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  sim = await startSimulator({ seed: 1, scale: 'small' });
  ({ dir, cleanup } = await tempDir('chainlake-received-'));
  proxy = await startProxy(sim, (url, status, body) => (status === 200 ? { body: alter(url, body) } : undefined));
}, 60_000);

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
    for (const t of [...Object.values(DATASETS).map(datasetShape), REJECTS_SHAPE]) {
      const glob = path.join(lake, t.name, '**', '*.parquet');
      const src = `read_parquet('${glob}', hive_partitioning = true)`;
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
  it('give exactly the lake that converting every entry gives, over every dataset', async () => {
    const received = { converted: 0, received: 0 };
    const logger: Logger = {
      log(_level, event, _message, fields) {
        if (event !== 'window.done' || !fields) return;
        received.received += Number(fields.receivedRows);
        received.converted += Number(fields.rows) - Number(fields.receivedRows);
      },
    };
    const doc = await demoDoc();
    const lakes: string[] = [];
    for (const stageReceived of [false, true]) {
      const lake = path.join(dir, stageReceived ? 'received' : 'converted');
      lakes.push(lake);
      const job = parseJob({ ...doc, lake }, 'received-test');
      const report = await runJob(job, {
        simulator: { urls: proxy.urls, apiKey: sim.apiKey },
        now: () => new Date('2026-01-15T12:00:00Z'),
        stageReceived,
        logger: stageReceived ? logger : undefined,
      });
      expect(report.errors).toEqual([]);
      expect(report.status).toBe('complete');
    }
    // Both ways were taken in the second run: most pages as received, the altered ones converted.
    expect(received.received).toBeGreaterThan(10_000);
    expect(received.converted).toBeGreaterThan(0);
    const [a, b] = [await contents(lakes[0]!), await contents(lakes[1]!)];
    expect(Object.keys(b).sort()).toEqual(Object.keys(a).sort());
    expect(Object.keys(a).length).toBeGreaterThanOrEqual(19);
    for (const name of Object.keys(a)) {
      expect(b[name]!.types, name).toBe(a[name]!.types);
      expect(b[name]!.rows.length, name).toBe(a[name]!.rows.length);
      expect(b[name]!.rows, name).toEqual(a[name]!.rows);
    }
    // The altered values landed as the converters read them.
    expect(a._rejects!.rows.some((r) => r.includes('not-a-number'))).toBe(true);
    expect(a.transactions!.rows.some((r) => r.includes('quote \\" backslash'))).toBe(true);
  }, 240_000);
});

describe('acceptRaw', () => {
  it('sends a page larger than DuckDB reads comfortably in one line through the converters', () => {
    const t = new RowTransformer(DATASETS.event_logs!, { network: 'mainnet', snapshotDate: '2026-01-15' });
    const entry = {
      timestamp: '2024-03-01T00:00:12Z',
      transaction_hash: `0x${'ab'.repeat(32)}`,
      log_index: '3',
      address: `0x${'cd'.repeat(20)}`,
      topic_0: `0x${'ef'.repeat(32)}`,
    };
    const entries = [entry, { ...entry, log_index: '4' }];
    const page = (bytes: number) => ({ scope: {}, results: {}, offset: 0, raw: { bytes: Buffer.alloc(bytes, 32), entriesAt: ['results', 'data'], entries } });
    expect(t.acceptRaw(entries, page(1024))?.rows).toBe(2);
    expect(t.acceptRaw(entries, page(MAX_RECEIVED_PAGE_BYTES + 1))).toBeUndefined();
    // The page's own entries only: a list cut from the body (the pager's probe reuse) is not the body.
    expect(t.acceptRaw(entries.slice(0, 1), page(1024))).toBeUndefined();
  });
});
