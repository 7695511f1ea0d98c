import { DuckDBInstance } from '@duckdb/node-api';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATASETS } from '../../src/datasets/registry.js';
import { stagedSelect } from '../../src/load/write/commit.js';
import { PageFiles } from '../../src/load/write/staging.js';
import { RowTransformer } from '../../src/transform/rows.js';
import { tempDir } from '../helpers/lake.js';

/** A window's pages staged as received go to several files of a bounded size, which DuckDB reads as one listing. */
let dir: string;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  ({ dir, cleanup } = await tempDir('chainlake-page-files-'));
});

afterAll(async () => {
  await cleanup?.();
});

const def = DATASETS.event_logs!;
const entry = (i: number) => ({
  timestamp: `2024-03-0${1 + (i % 3)}T00:00:12Z`,
  transaction_hash: `0x${i.toString(16).padStart(64, '0')}`,
  log_index: String(i),
  address: `0x${'cd'.repeat(20)}`,
  topic_0: `0x${'ef'.repeat(32)}`,
});

describe('PageFiles', () => {
  it('starts a new file once the current one holds the limit; the files read back as every page, once', async () => {
    const t = new RowTransformer(def, { network: 'mainnet', snapshotDate: '2026-01-15' });
    const stem = path.join(dir, 'pages', 'event_logs', '7');
    const files = new PageFiles(stem, 100_000);
    let next = 0;
    const pageBytes: number[] = [];
    for (let p = 0; p < 7; p++) {
      const entries = Array.from({ length: 250 }, () => entry(next++));
      const bytes = Buffer.from(JSON.stringify({ status: '1', results: { data: entries } }));
      pageBytes.push(bytes.length);
      const raw = { bytes, entriesAt: ['results', 'data'], entries };
      const accepted = t.acceptRaw(entries, { scope: {}, results: {}, offset: p * 250, raw });
      expect(accepted?.rows).toBe(250);
      await files.writePage(accepted!, raw);
    }
    await files.close();
    // About 60 kB a page, 100 kB a file: a file closes after its second page.
    expect(pageBytes.every((b) => b > 50_000 && b < 100_000)).toBe(true);
    expect(files.files.map((f) => f.rows)).toEqual([500, 500, 500, 250]);
    expect((await readdir(path.dirname(stem))).sort()).toEqual(['7-0.ndjson', '7-1.ndjson', '7-2.ndjson', '7-3.ndjson']);
    expect(files.rows).toBe(1750);
    for (const f of files.files) expect((await readFile(f.file, 'utf8')).split('\n').filter(Boolean).length).toBe(f.rows / 250);

    const instance = await DuckDBInstance.create(':memory:');
    const conn = await instance.connect();
    try {
      const select = stagedSelect(
        def,
        'run-1',
        '2026-01-15T00:00:00Z',
        [],
        files.files.map((f) => ({ file: f.file, entriesAt: ['results', 'data'], maxLineBytes: f.maxLineBytes })),
      );
      const [row] = (
        await conn.runAndReadAll(`SELECT count(*)::BIGINT, count(DISTINCT log_index)::BIGINT, min(log_index), max(log_index) FROM (${select})`)
      ).getRowsJS();
      expect(row).toEqual([1750n, 1750n, 0n, 1749n]);
    } finally {
      conn.closeSync();
      instance.closeSync();
    }

    await files.discard();
    expect(await readdir(path.dirname(stem))).toEqual([]);
  });
});
