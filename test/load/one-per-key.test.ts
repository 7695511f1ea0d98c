import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { onePerKey } from '../../src/load/write/merge.js';

/**
 * The merge's reduction to one row per natural key (onePerKey) against the rule it implements, a window over
 * every row: the same rows, on real DuckDB, for generated tables with NULL key parts, ties and repeats.
 */
let instance: DuckDBInstance;
let conn: DuckDBConnection;

const KEY = ['p', 'k1', 'k2'];
const RANK = 'seen DESC, hash(v)';
const TEMP = { repeated: 'repeated', winners: 'winners' };
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

const sorted = async (query: string) => (await conn.runAndReadAll(`SELECT * FROM (${query}) ORDER BY ALL NULLS FIRST`)).getRowsJS();

async function reducedAndRule(rows: readonly Row[]) {
  await load(rows);
  const reduced = await sorted(await onePerKey(conn, 'SELECT * FROM t', KEY, RANK, TEMP));
  const rule = await sorted(`SELECT * FROM t QUALIFY row_number() OVER (PARTITION BY ${KEY.join(', ')} ORDER BY ${RANK}) = 1`);
  return { reduced, rule };
}

describe('onePerKey', () => {
  it('keeps the newest row of a key, treats NULL key parts as equal values, and passes rows of single keys through', async () => {
    const { reduced, rule } = await reducedAndRule([
      { p: 'd1', k1: 1, k2: 'a', seen: 1, v: 10 },
      { p: 'd1', k1: 1, k2: 'a', seen: 2, v: 11 },
      { p: 'd1', k1: null, k2: 'a', seen: 1, v: 20 },
      { p: 'd1', k1: null, k2: 'a', seen: 3, v: 21 },
      { p: 'd1', k1: null, k2: null, seen: 1, v: 30 },
      { p: 'd1', k1: null, k2: null, seen: 1, v: 30 },
      { p: 'd2', k1: 1, k2: 'a', seen: 1, v: 40 },
    ]);
    expect(reduced).toEqual([
      ['d1', null, null, 1, 30],
      ['d1', null, 'a', 3, 21],
      ['d1', 1, 'a', 2, 11],
      ['d2', 1, 'a', 1, 40],
    ]);
    expect(reduced).toEqual(rule);
  });

  it('returns the rows as they are when no key repeats', async () => {
    await load([
      { p: 'd1', k1: 1, k2: 'a', seen: 1, v: 1 },
      { p: 'd1', k1: null, k2: 'a', seen: 1, v: 1 },
    ]);
    expect(await onePerKey(conn, 'SELECT * FROM t', KEY, RANK, TEMP)).toBe('SELECT * FROM t');
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
        const { reduced, rule } = await reducedAndRule(rows);
        expect(reduced).toEqual(rule);
      }),
      { numRuns: 150, seed: 8 },
    );
  });
});
