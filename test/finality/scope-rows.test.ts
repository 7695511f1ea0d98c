import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { describe, expect, it } from 'vitest';
import type { DatasetDef } from '../../src/datasets/dataset.js';
import { DATASETS } from '../../src/datasets/registry.js';
import { replaceable, scopeRowsTable, type ScopeRange } from '../../src/datasets/scope-rows.js';
import { openEngine } from '../../src/load/engine.js';
import { keptRows } from '../../src/load/write/replace.js';

/** The ids (column `id`) of the rows of `table` that `windows` hold: those the kept-rows condition drops. */
async function heldIds(conn: DuckDBConnection, def: DatasetDef, table: string, windows: readonly ScopeRange[]): Promise<number[]> {
  const kept = await keptRows(conn, def, windows);
  if (!kept) return [];
  try {
    const rows = (await conn.runAndReadAll(`SELECT id FROM ${table} WHERE NOT (${kept.condition}) ORDER BY id`)).getRowsJS();
    return rows.map((r) => Number(r[0]));
  } finally {
    await kept.drop();
  }
}

describe('scope rows', () => {
  it('every block-ranged endpoint of a dataset with a block column declares the columns its scope filters on', () => {
    const ranged = Object.values(DATASETS).flatMap((def) => def.endpoints.filter((e) => e.blockRange && def.blockColumn).map((e) => ({ def, e })));
    expect(ranged.length).toBeGreaterThanOrEqual(5);
    for (const { def, e } of ranged) {
      expect(replaceable(def, e), `${def.name}/${e.id}`).toBe(true);
      for (const cols of Object.values(e.scopeColumns!))
        for (const c of cols)
          expect(
            def.columns.map((x) => x.name),
            `${def.name}/${e.id}`,
          ).toContain(c);
    }
  });

  it('a window holds the rows of its range with its scope value in one of its columns (lower-cased), from its endpoint where rows record it', async () => {
    const def = DATASETS.erc721_transfers!;
    const [e, other] = def.endpoints as [ScopeRange['endpoint'], ScopeRange['endpoint']];
    const db = await DuckDBInstance.create(':memory:');
    const conn = await db.connect();
    try {
      await conn.run(`CREATE TABLE t (id INTEGER, block_number BIGINT, sender VARCHAR, receiver VARCHAR, origin_endpoint VARCHAR)`);
      // (id, block, sender, receiver, endpoint)
      const rows: [number, number | null, string | null, string | null, string][] = [
        [1, 5, '0xab', '0x99', e.id], // sender in range
        [2, 9, '0x99', '0xcd', e.id], // receiver, the range's last block
        [3, 4, '0xab', '0x99', e.id], // before the range
        [4, 10, '0xab', '0x99', e.id], // after it
        [5, 7, '0xab', '0x99', other.id], // another endpoint's row
        [6, 7, null, '0xab', e.id], // NULL sender, the value as receiver
        [7, 7, '0x99', null, e.id], // another address, NULL receiver
        [8, null, '0xab', '0xab', e.id], // no block
        [9, 12, '0xef', '0x99', e.id], // the third window's range and address
        [10, 12, '0xab', '0x99', e.id], // the first window's address in the third's range
      ];
      const lit = (v: string | number | null): string => (v === null ? 'NULL' : typeof v === 'number' ? String(v) : `'${v}'`);
      await conn.run(`INSERT INTO t VALUES ${rows.map((r) => `(${r.map(lit).join(', ')})`).join(', ')}`);
      const windows: ScopeRange[] = [
        { endpoint: e, scope: { address: '0xAB' }, range: { from: 5, to: 9 } },
        { endpoint: e, scope: { address: '0xcd' }, range: { from: 5, to: 9 } },
        { endpoint: e, scope: { address: '0xEF' }, range: { from: 11, to: 14 } },
      ];
      expect(await heldIds(conn, def, 't', windows)).toEqual([1, 2, 6, 9]);
      expect(await heldIds(conn, def, 't', [{ ...windows[0]!, endpoint: other }])).toEqual([5]);
      // Nothing left behind on the connection.
      const [[tables]] = (
        await conn.runAndReadAll(`SELECT count(*)::INTEGER FROM duckdb_tables() WHERE table_name LIKE '__chainlake_replaced%'`)
      ).getRowsJS() as [[number]];
      expect(tables).toBe(0);
    } finally {
      conn.closeSync();
      db.closeSync();
    }
    // A window of a block-time dataset without its block times replaces nothing (its rows name no block).
    expect(
      scopeRowsTable(DATASETS.event_logs!, [{ endpoint: DATASETS.event_logs!.endpoints[0]!, scope: { contract: '0x1' }, range: { from: 1, to: 2 } }]),
    ).toBeUndefined();
  });

  it('event_logs: a window with its block times holds the logs of its contract and topics between them, as the API lists them', async () => {
    const def = DATASETS.event_logs!;
    const e = def.endpoints[0]!;
    const [C, D, T, A, X, Y] = ['0xc', '0xd', '0x' + 't'.repeat(4), '0x' + 'a'.repeat(4), '0x' + '1'.repeat(4), '0x' + '2'.repeat(4)];
    // Logs: (id, contract, time, topic_0, topic_1, topic_2).
    const logs: [number, string, string, string | null, string | null, string | null][] = [
      [1, C, '2024-03-05T23:59:00Z', T, X, Y], // before the window
      [2, C, '2024-03-06T00:00:00Z', T, X, Y], // the window's first block
      [3, C, '2024-03-06T00:00:30Z', T, X, null],
      [4, C, '2024-03-06T00:00:30Z', T, Y, null],
      [5, C, '2024-03-06T00:00:30Z', A, X, null], // another event
      [6, C, '2024-03-06T00:00:30Z', null, null, null], // anonymous
      [7, D, '2024-03-06T00:00:30Z', T, X, Y], // another contract
      [8, C, '2024-03-06T00:01:00Z', T, X, Y], // the window's last block
      [9, C, '2024-03-06T00:01:01Z', T, X, Y], // after it
    ];
    const times = { from: '2024-03-06T00:00:00.000Z', to: '2024-03-06T00:01:00.000Z' };
    const db = await DuckDBInstance.create(':memory:');
    const conn = await db.connect();
    try {
      await conn.run(`SET TimeZone = 'UTC'`);
      await conn.run(
        `CREATE TABLE event_logs ("timestamp" TIMESTAMPTZ, address VARCHAR, topic_0 VARCHAR, topic_1 VARCHAR, topic_2 VARCHAR, topic_3 VARCHAR, id INTEGER)`,
      );
      const lit = (v: string | null): string => (v === null ? 'NULL' : `'${v}'`);
      await conn.run(
        `INSERT INTO event_logs VALUES ${logs.map(([id, c, t, t0, t1, t2]) => `('${t}', '${c}', ${lit(t0)}, ${lit(t1)}, ${lit(t2)}, NULL, ${id})`).join(', ')}`,
      );
      const held = async (...scopes: Record<string, string>[]): Promise<number[]> =>
        heldIds(
          conn,
          def,
          'event_logs',
          scopes.map((scope) => ({ endpoint: e, scope, range: { from: 100, to: 105 }, times })),
        );
      // All the contract's logs; its Transfers; Transfers to X and Y (and), to X or Y (or); type single ignores topic 1.
      expect(await held({ contract: C.toUpperCase() })).toEqual([2, 3, 4, 5, 6, 8]);
      expect(await held({ contract: C, topic0: T })).toEqual([2, 3, 4, 8]);
      expect(await held({ contract: C, topic0: T, topic1: X, topic2: Y })).toEqual([2, 8]);
      expect(await held({ contract: C, topic0: T, topic1: X, topic2: Y, operand: 'or' })).toEqual([2, 3, 8]);
      expect(await held({ contract: C, topic0: T, topic1: Y, type: 'single' })).toEqual([2, 3, 4, 8]);
      // Two topic scopes of one contract each hold their own logs, neither widened by the other.
      expect(await held({ contract: C, topic0: A }, { contract: C, topic0: T, topic1: Y })).toEqual([4, 5]);
      expect(await held({ contract: C, topic0: A }, { contract: C, topic0: T, topic1: X, topic2: Y, operand: 'or' }, { contract: D, topic1: X })).toEqual([
        2, 3, 5, 7, 8,
      ]);
      // Without its block times a window replaces nothing (its rows name no block).
      expect(scopeRowsTable(def, [{ endpoint: e, scope: { contract: C }, range: { from: 100, to: 105 } }])).toBeUndefined();
    } finally {
      conn.closeSync();
      db.closeSync();
    }
  });
});

describe('scope rows at scale', () => {
  it('a condition of many replaced windows of distinct addresses runs within the engine memory a commit has and keeps exactly the right rows', async () => {
    // 300 fixed 250-block chunks, each of its own 40 addresses, fetched again: the condition a commit keeps old rows
    // by. Written as constants (IN lists, equalities), DuckDB planned each list as a join with a hash table of its own
    // and ran out of memory; the condition's text grew with every window.
    const def = DATASETS.transactions!;
    const e = def.endpoints.find((x) => x.blockRange && x.scopeColumns)!;
    const key = Object.keys(e.scopeColumns!)[0]!;
    const [RANGES, PER_RANGE, SPAN, ROWS] = [300, 40, 250, 30_000];
    const address = (n: number): string => `0x${n.toString(16).padStart(40, '0')}`;
    const windows: ScopeRange[] = Array.from({ length: RANGES }, (_, r) =>
      Array.from({ length: PER_RANGE }, (_, j) => ({
        endpoint: e,
        // Given as a job may write it: the lake holds addresses lower-cased.
        scope: {
          [key]: `0x${address(r * PER_RANGE + j)
            .slice(2)
            .toUpperCase()}`,
        },
        range: { from: r * SPAN, to: r * SPAN + SPAN - 1 },
      })),
    ).flat();
    const dir = await mkdtemp(path.join(os.tmpdir(), 'chainlake-scope-rows-'));
    // The engine a commit merges in, at its memory limit.
    const engine = await openEngine({ tempDir: dir });
    try {
      const conn = engine.conn;
      // The rows as a commit reads them: a lake file's, filtered as they are read. A third of them sent by one of
      // their block's range's addresses, the others by and to addresses of any range or of none; some without.
      const hex = (n: string): string => `'0x' || lpad(printf('%x', ${n}), 40, '0')`;
      const block = `(i * 37) % ${(RANGES + 20) * SPAN}`;
      const values: Record<string, string> = {
        [def.blockColumn!]: block,
        sender: `CASE WHEN i % 11 = 0 THEN NULL WHEN i % 3 = 0 THEN ${hex(`(${block}) // ${SPAN} * ${PER_RANGE} + i % ${PER_RANGE}`)} ELSE ${hex(`(i * 7919) % ${(RANGES + 20) * PER_RANGE}`)} END`,
        receiver: `CASE WHEN i % 4 = 0 THEN NULL ELSE ${hex(`(i * 104729) % ${(RANGES + 20) * PER_RANGE}`)} END`,
        contract_address: `CASE WHEN i % 13 = 0 THEN ${hex(`(${block}) // ${SPAN} * ${PER_RANGE} + 7`)} END`,
      };
      const file = path.join(dir, 'rows.parquet');
      await conn.run(
        `COPY (SELECT ${def.columns.map((c) => `${values[c.name] ?? 'NULL'} AS "${c.name}"`).join(', ')} FROM range(${ROWS}) r(i)) TO '${file}' (FORMAT parquet)`,
      );
      const kept = (await keptRows(conn, def, windows))!;
      const one = (await keptRows(conn, def, windows.slice(0, 1)))!;
      try {
        const columns = [def.blockColumn!, 'sender', 'receiver', 'contract_address'].map((c) => `"${c}"`).join(', ');
        const read = async (where: string): Promise<string[]> =>
          (await conn.runAndReadAll(`SELECT ${columns} FROM read_parquet('${file}')${where}`))
            .getRowsJS()
            .map((r) => JSON.stringify(r.map((v) => (v === null ? null : String(v)))));
        const got = await read(` WHERE ${kept.condition}`);
        // Checked in JS: a row goes when one of its addresses is a window's and its block in that window's range.
        const rangesOf = new Map<string, ScopeRange['range'][]>();
        for (const w of windows) rangesOf.set(w.scope[key]!.toLowerCase(), [...(rangesOf.get(w.scope[key]!.toLowerCase()) ?? []), w.range]);
        const all = await read('');
        const expected = all.filter((row) => {
          const [b, ...addresses] = JSON.parse(row) as [string | null, ...(string | null)[]];
          const at = Number(b);
          return b === null || !addresses.some((a) => a !== null && rangesOf.get(a)?.some((r) => r.from <= at && at <= r.to));
        });
        expect(expected.length).toBeLessThan(all.length - 2_000);
        expect(expected.length).toBeGreaterThan(all.length / 2);
        expect(got.sort()).toEqual(expected.sort());
        // The plan is the same for one window and for all of them: per scope column a semi-join against the table of
        // windows (a delim join, its mark join and the join itself), none per window or value.
        const joins = async (condition: string): Promise<number> => {
          const plan = (await conn.runAndReadAll(`EXPLAIN SELECT * FROM read_parquet('${file}') WHERE ${condition}`)).getRowsJS();
          return (
            plan
              .map((r) => String(r[1]))
              .join('\n')
              .match(/JOIN/g) ?? []
          ).length;
        };
        expect(await joins(kept.condition)).toBe(await joins(one.condition));
        expect(await joins(kept.condition)).toBeLessThanOrEqual(3 * e.scopeColumns![key]!.length);
        // The condition's text does not grow with the windows either.
        expect(kept.condition.length).toBe(one.condition.length);
      } finally {
        await kept.drop();
        await one.drop();
      }
    } finally {
      engine.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
