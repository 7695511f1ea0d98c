import { DuckDBInstance } from '@duckdb/node-api';
import { describe, expect, it } from 'vitest';
import { DATASETS } from '../../src/datasets/registry.js';
import { replaceable, scopeRowsCondition } from '../../src/datasets/scope-rows.js';

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

  it('windows of one endpoint and range share one list of values, values lower-cased, the endpoint named where rows record it', () => {
    const def = DATASETS.erc721_transfers!;
    const e = def.endpoints[0]!;
    const sql = scopeRowsCondition(def, [
      { endpoint: e, scope: { address: '0xAB' }, range: { from: 5, to: 9 } },
      { endpoint: e, scope: { address: '0xcd' }, range: { from: 5, to: 9 } },
    ]);
    expect(sql).toBe(
      `("block_number" BETWEEN 5 AND 9 AND ((("sender" = '0xab' OR "sender" = '0xcd') OR ("receiver" = '0xab' OR "receiver" = '0xcd'))) AND "origin_endpoint" = '${e.id}')`,
    );
    expect(
      scopeRowsCondition(DATASETS.event_logs!, [{ endpoint: DATASETS.event_logs!.endpoints[0]!, scope: { contract: '0x1' }, range: { from: 1, to: 2 } }]),
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
      const held = async (...scopes: Record<string, string>[]): Promise<number[]> => {
        const cond = scopeRowsCondition(
          def,
          scopes.map((scope) => ({ endpoint: e, scope, range: { from: 100, to: 105 }, times })),
        );
        const rows = (await conn.runAndReadAll(`SELECT id FROM event_logs WHERE COALESCE((${cond}), false) ORDER BY id`)).getRowsJS();
        return rows.map((r) => Number(r[0]));
      };
      // All the contract's logs; its Transfers; Transfers to X and Y (and), to X or Y (or); type single ignores topic 1.
      expect(await held({ contract: C.toUpperCase() })).toEqual([2, 3, 4, 5, 6, 8]);
      expect(await held({ contract: C, topic0: T })).toEqual([2, 3, 4, 8]);
      expect(await held({ contract: C, topic0: T, topic1: X, topic2: Y })).toEqual([2, 8]);
      expect(await held({ contract: C, topic0: T, topic1: X, topic2: Y, operand: 'or' })).toEqual([2, 3, 8]);
      expect(await held({ contract: C, topic0: T, topic1: Y, type: 'single' })).toEqual([2, 3, 4, 8]);
      // Two topic scopes of one contract are two groups, never one IN list that would widen either.
      expect(await held({ contract: C, topic0: A }, { contract: C, topic0: T, topic1: Y })).toEqual([4, 5]);
      // Without its block times a window replaces nothing (its rows name no block).
      expect(scopeRowsCondition(def, [{ endpoint: e, scope: { contract: C }, range: { from: 100, to: 105 } }])).toBeUndefined();
    } finally {
      conn.closeSync();
      db.closeSync();
    }
  });
});

describe('scope rows at scale', () => {
  it('a condition of many replaced windows runs within the engine memory a commit has', async () => {
    // Fixed 250-block chunks of five addresses, fetched again: the condition a commit keeps old rows by. Written
    // as IN lists, DuckDB planned each as a join with a hash table of its own and ran out of memory on 1,300 rows.
    const { openEngine } = await import('../../src/load/engine.js');
    const { mkdtemp, rm } = await import('node:fs/promises');
    const os = await import('node:os');
    const path = await import('node:path');
    const def = DATASETS.transactions!;
    const e = def.endpoints.find((x) => x.blockRange && x.scopeColumns)!;
    const key = Object.keys(e.scopeColumns!)[0]!;
    const addresses = Array.from({ length: 5 }, (_, i) => `0x${String(i + 1).repeat(40)}`);
    const windows = Array.from({ length: 60 }, (_, i) => i).flatMap((i) =>
      addresses.map((a) => ({ endpoint: e, scope: { [key]: a }, range: { from: i * 250, to: i * 250 + 249 } })),
    );
    const held = scopeRowsCondition(def, windows)!;
    const dir = await mkdtemp(path.join(os.tmpdir(), 'chainlake-scope-rows-'));
    const engine = await openEngine({ tempDir: dir });
    try {
      const cols = def.columns.map((c) => c.name);
      const pick = (c: string) =>
        c === def.blockColumn ? 'i * 20' : ['sender', 'receiver', 'contract_address'].includes(c) ? `'0x' || repeat(CAST(i % 7 AS VARCHAR), 40)` : 'NULL';
      // The rows as a commit reads them: a lake file's, filtered as they are read.
      const file = path.join(dir, 'rows.parquet');
      await engine.conn.run(`COPY (SELECT ${cols.map((c) => `${pick(c)} AS "${c}"`).join(', ')} FROM range(1300) r(i)) TO '${file}' (FORMAT parquet)`);
      // No join per list of values in the plan: each was a hash table of its own (of a fixed size whatever its rows).
      const plan = (await engine.conn.runAndReadAll(`EXPLAIN SELECT * FROM read_parquet('${file}') WHERE NOT COALESCE((${held}), false)`)).getRowsJS();
      expect(plan.map((r) => String(r[1])).join('\n')).not.toMatch(/JOIN/);
      await engine.conn.run(
        `CREATE TABLE kept AS SELECT * FROM (SELECT * FROM read_parquet('${file}') WHERE NOT COALESCE((${held}), false)) ORDER BY "${def.blockColumn}"`,
      );
      const [[n]] = (await engine.conn.runAndReadAll('SELECT count(*)::INTEGER FROM kept')).getRowsJS() as [[number]];
      // Rows of blocks 15,000 and above (i >= 750) and those of no scope address (i % 7 of 0 or 6) stay.
      expect(n).toBe(550 + 108 + 107);
    } finally {
      engine.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
