import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sortedOnePerKey } from '../../src/load/write/merge.js';

/**
 * The merge's reduction to one row per natural key (sortedOnePerKey) against the rule it implements, a window
 * over every row: the same rows, on real DuckDB, for generated tables with NULL key parts, ties and repeats, and
 * the reduced table still in the merge's order when scanned as it lies (the writers read it by row-id range).
 */
let instance: DuckDBInstance;
let conn: DuckDBConnection;

const KEY = ['p', 'k1', 'k2'];
const RANK = 'seen DESC, hash(v)';
const ORDER = 'p, k1, k2, seen, v';
type Row = { p: string; k1: number | null; k2: string | null; seen: number; v: number };

beforeAll(async () => {
  instance = await DuckDBInstance.create(':memory:');
  conn = await instance.connect();
});

afterAll(() => {
  instance?.closeSync();
});

async function load(rows: readonly Row[]): Promise<void> {
  await conn.run('CREATE OR REPLACE TABLE t (p VARCHAR, k1 INTEGER, k2 VARCHAR, seen INTEGER, v INTEGER)');
  if (rows.length === 0) return;
  const sql = (x: string | number | null) => (x === null ? 'NULL' : typeof x === 'number' ? String(x) : `'${x}'`);
  await conn.run(`INSERT INTO t VALUES ${rows.map((r) => `(${[r.p, r.k1, r.k2, r.seen, r.v].map(sql).join(', ')})`).join(', ')}`);
}

const sorted = async (query: string) => (await conn.runAndReadAll(`SELECT * FROM (${query}) ORDER BY ${ORDER}`)).getRowsJS();
/** The table as it lies, in row-id order: what a writer's row-id range scan reads. */
const asItLies = async (table: string) => (await conn.runAndReadAll(`SELECT p, k1, k2, seen, v FROM ${table} ORDER BY rowid`)).getRowsJS();

async function reducedAndRule(rows: readonly Row[]) {
  await load(rows);
  const deleted = await sortedOnePerKey(conn, 'SELECT * FROM t', 'm', ORDER, KEY, RANK, 'repeated');
  const reduced = await asItLies('m');
  const rule = await sorted(`SELECT * FROM t QUALIFY row_number() OVER (PARTITION BY ${KEY.join(', ')} ORDER BY ${RANK}) = 1`);
  return { reduced, rule, deleted };
}

describe('sortedOnePerKey', () => {
  it('keeps the newest row of a key, treats NULL key parts as equal values, and passes rows of single keys through', async () => {
    const { reduced, rule, deleted } = await reducedAndRule([
      { p: 'd1', k1: 1, k2: 'a', seen: 1, v: 10 },
      { p: 'd1', k1: 1, k2: 'a', seen: 2, v: 11 },
      { p: 'd1', k1: null, k2: 'a', seen: 1, v: 20 },
      { p: 'd1', k1: null, k2: 'a', seen: 3, v: 21 },
      { p: 'd1', k1: null, k2: null, seen: 1, v: 30 },
      { p: 'd1', k1: null, k2: null, seen: 1, v: 30 },
      { p: 'd2', k1: 1, k2: 'a', seen: 1, v: 40 },
    ]);
    expect(reduced).toEqual([
      ['d1', 1, 'a', 2, 11],
      ['d1', null, 'a', 3, 21],
      ['d1', null, null, 1, 30],
      ['d2', 1, 'a', 1, 40],
    ]);
    expect(reduced).toEqual(rule);
    expect(deleted).toBe(3);
  });

  it('sorts the rows as they are, deleting none, when no key repeats', async () => {
    const { reduced, deleted } = await reducedAndRule([
      { p: 'd2', k1: 1, k2: 'a', seen: 1, v: 1 },
      { p: 'd1', k1: null, k2: 'a', seen: 1, v: 1 },
      { p: 'd1', k1: 1, k2: 'a', seen: 1, v: 1 },
    ]);
    expect(deleted).toBe(0);
    expect(reduced).toEqual([
      ['d1', 1, 'a', 1, 1],
      ['d1', null, 'a', 1, 1],
      ['d2', 1, 'a', 1, 1],
    ]);
  });

  it('gives the rows the window over every row gives, for any table', async () => {
    const row = fc.record({
      p: fc.constantFrom('d1', 'd2'),
      k1: fc.constantFrom(1, 2, null),
      k2: fc.constantFrom('a', 'b', null),
      seen: fc.integer({ min: 1, max: 3 }),
      v: fc.integer({ min: 0, max: 3 }),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(row, { maxLength: 40 }), async (rows) => {
        const { reduced, rule, deleted } = await reducedAndRule(rows);
        expect(reduced).toEqual(rule);
        expect(deleted).toBe(rows.length - rule.length);
      }),
      { numRuns: 150, seed: 8 },
    );
  });
});
