import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openEngine, type Engine } from '../../src/load/engine.js';
import { FRESH_COLUMN, mergeSlices, type PartitionRows } from '../../src/load/write/merge-slices.js';
import type { TableShape } from '../../src/load/schema.js';

// The merge both committers call (the single machine's prepareDataset and the distributed mergeFragments):
// fresh rows and a partition's current rows, one row per key, sliced, each partition handed to the caller's
// writer as a sorted row range, and the derivation hook run on each merged slice with the commit's own rows marked.
const shape: TableShape = {
  name: 'things',
  columns: [
    { name: 'id', type: 'BIGINT', doc: '' },
    { name: 'v', type: 'VARCHAR', doc: '' },
    { name: '_run_id', type: 'VARCHAR', doc: '' },
    { name: '_ingested_at', type: 'TIMESTAMPTZ', doc: '' },
  ],
  key: ['id'],
  order: ['id'],
  partition: 'day',
};

describe('mergeSlices', () => {
  let dir: string;
  let engine: Engine;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'chainlake-merge-slices-'));
    engine = await openEngine({ tempDir: path.join(dir, 'tmp') });
  });
  afterAll(async () => {
    engine?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('merges fresh rows with what each partition holds, one row per key, slice by slice, and marks the fresh rows for the derivation', async () => {
    const conn = engine.conn;
    const old = path.join(dir, 'd1.parquet');
    // d1 holds ids 1 and 5 from an earlier run; d3 holds id 9, which a replaced window removes (`keep`).
    await conn.run(
      `COPY (SELECT * FROM (VALUES (1, 'old', 'r0', TIMESTAMPTZ '2026-01-01 00:00:00+00', 'd1'), (5, 'kept', 'r0', TIMESTAMPTZ '2026-01-01 00:00:00+00', 'd1'),
                                     (9, 'gone', 'r0', TIMESTAMPTZ '2026-01-01 00:00:00+00', 'd3')) t(id, v, _run_id, _ingested_at, p))
       TO '${old}' (FORMAT parquet)`,
    );
    await conn.run(
      `CREATE OR REPLACE TEMP TABLE fresh AS SELECT id::BIGINT AS id, v, 'r1' AS _run_id, ts::TIMESTAMPTZ AS _ingested_at, __partition FROM (VALUES
         (3, 'new3', '2026-02-01 00:00:00+00', 'd1'), (1, 'new1', '2026-02-01 00:00:00+00', 'd1'),
         (7, 'first', '2026-02-01 00:00:00+00', 'd2'), (7, 'second', '2026-02-02 00:00:00+00', 'd2'), (8, 'x', '2026-02-01 00:00:00+00', 'd2')
       ) t(id, v, ts, __partition)`,
    );
    const existingAsked: string[][] = [];
    const derived: { partitions: string[]; fresh: number; rows: number; index: number }[] = [];
    const files = await mergeSlices<{ partition: string; rows: PartitionRows; content: unknown[][] }>({
      engine,
      conn,
      shape,
      name: 'things_test',
      fresh: 'fresh',
      partitions: [
        ['d1', 4],
        ['d2', 3],
        ['d3', 1],
      ],
      existing: async (slice) => {
        existingAsked.push([...slice]);
        return `SELECT * EXCLUDE (p), p AS __partition FROM read_parquet('${old}') WHERE p IN (${slice.map((p) => `'${p}'`).join(', ')}) AND id <> 9`;
      },
      runId: 'r1',
      sliceRows: 4,
      writers: 2,
      derive: {
        slice: (table, partitions, index) => ({
          first: [
            async (writer) => {
              const [fresh, rows] = (
                await writer.runAndReadAll(`SELECT count(*) FILTER (WHERE "${FRESH_COLUMN}")::INTEGER, count(*)::INTEGER FROM ${table}`)
              ).getRowsJS()[0] as [number, number];
              derived.push({ partitions: [...partitions], fresh, rows, index });
            },
          ],
          then: [],
        }),
      },
      write: async (writer, partition, rows) => ({ partition, rows, content: (await writer.runAndReadAll(`SELECT id, v FROM (${rows.select})`)).getRowsJS() }),
    });

    // d1 (4 rows) fills the first slice; d2 and d3 share the second.
    expect(existingAsked).toEqual([['d1'], ['d2', 'd3']]);
    expect(files.map((f) => f.partition)).toEqual(['d1', 'd2', 'd3']);
    // Sorted by the shape's order, the newest row of a key wins, the partition's other rows stay.
    expect(files[0]!.content).toEqual([
      [1n, 'new1'],
      [3n, 'new3'],
      [5n, 'kept'],
    ]);
    expect(files[1]!.content).toEqual([
      [7n, 'second'],
      [8n, 'x'],
    ]);
    // A partition whose rows all went is still handed to the writer, empty: its file replaces the old ones.
    expect(files[2]!.content).toEqual([]);
    expect(files.map((f) => [f.rows.rows, f.rows.runRows])).toEqual([
      [3, 2],
      [2, 2],
      [0, 0],
    ]);
    // The derivation sees each merged slice once, with the commit's own rows marked (not the rows the partitions held).
    expect(derived).toEqual([
      { partitions: ['d1'], fresh: 2, rows: 3, index: 0 },
      { partitions: ['d2', 'd3'], fresh: 2, rows: 2, index: 1 },
    ]);
    // Its tables are gone once it returns.
    const left = (await conn.runAndReadAll(`SELECT table_name FROM duckdb_tables() WHERE table_name LIKE '__chainlake_merged_things_test%'`)).getRowsJS();
    expect(left).toEqual([]);
  });
});
