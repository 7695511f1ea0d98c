import { spawnSync } from 'node:child_process';
import { chmod, cp, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ChainlakeError,
  ERROR_CODES,
  exportDataset,
  openLake,
  QueryRefusedError,
  streamDataset,
  type DatasetRequest,
  type RecordBatch,
  type Row,
} from '../../src/index.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { tempDir } from '../helpers/lake.js';
import { lockDown, unprivileged, unprivilegedCanRun } from '../helpers/permissions.js';

let sim: RunningSimulator;
let dir: string;
let cleanup: () => Promise<void>;
let request: DatasetRequest;

beforeAll(async () => {
  sim = await startSimulator({ seed: 7 });
  ({ dir, cleanup } = await tempDir());
  request = {
    dataset: 'transactions',
    spec: { addresses: sim.examples.addresses.slice(0, 2) },
    endpoints: { mainnet: sim.urls.mainnet, finance: sim.urls.finance },
    apiKey: sim.apiKey,
    concurrency: 4,
  };
});

afterAll(async () => {
  await sim?.close();
  if (dir) await lockDown(path.join(dir, 'moved'), 0o755).catch(() => undefined);
  await cleanup?.();
});

/** The value of a Decimal128 cell (four little-endian 32-bit words, two's complement) as a bigint. */
function decimal(words: Uint32Array | null): bigint | null {
  if (words === null) return null;
  let x = 0n;
  for (let i = 3; i >= 0; i--) x = (x << 32n) | BigInt(words[i]!);
  return BigInt.asIntN(128, x);
}

/** hash -> "block|value|timestamp ms|status" of every row of the batches. */
function digest(batches: RecordBatch[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const b of batches) {
    const hash = b.getChild('transaction_hash')!;
    const block = b.getChild('block_number')!;
    const value = b.getChild('value')!;
    const ts = b.getChild('timestamp')!;
    const status = b.getChild('tx_status')!;
    for (let i = 0; i < b.numRows; i++) {
      out.set(String(hash.get(i)), `${block.get(i)}|${decimal(value.get(i) as Uint32Array | null)}|${ts.get(i)}|${status.get(i)}`);
    }
  }
  return out;
}

async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

describe('the library API', () => {
  let lakeRows: Row[];

  it('exports a dataset into a lake and queries it, streaming exact rows', async () => {
    const lake = path.join(dir, 'lake');
    const report = await exportDataset({ ...request, lake });
    expect(report.status).toBe('complete');
    expect(report.totals.rows).toBeGreaterThan(100);
    const l = await openLake(lake);
    try {
      lakeRows = await collect(l.query('SELECT * FROM transactions ORDER BY transaction_hash'));
      expect(lakeRows.length).toBe(report.totals.rows);
      // Exact: an amount is a bigint (DuckDB's own JS conversion would give a lossy double).
      expect(typeof lakeRows[0]!.value).toBe('bigint');
      expect(typeof lakeRows[0]!.block_number).toBe('bigint');
      const refused = collect(l.query(`COPY transactions TO '${path.join(dir, 'x.csv')}'`));
      await expect(refused).rejects.toBeInstanceOf(QueryRefusedError);
      // One family with stable codes: a caller matches on `code`.
      await expect(refused).rejects.toBeInstanceOf(ChainlakeError);
      await expect(refused).rejects.toMatchObject({ code: 'CHAINLAKE_QUERY_REFUSED' });
      expect(ERROR_CODES).toContain('CHAINLAKE_QUERY_REFUSED');
      // SQL that does not parse: refused with the same code, DuckDB's words kept.
      await expect(collect(l.query('SELEC 1'))).rejects.toMatchObject({
        code: 'CHAINLAKE_QUERY_REFUSED',
        message: expect.stringMatching(/^Parser Error: syntax error at or near "SELEC"/),
      });
      // SQL naming what the lake does not have: refused with the same code, DuckDB's words kept.
      await expect(collect(l.query('SELECT no_such_column FROM transactions'))).rejects.toMatchObject({
        code: 'CHAINLAKE_QUERY_REFUSED',
        message: expect.stringMatching(/^Binder Error: .*no_such_column/),
      });
      await expect(collect(l.query('SELECT * FROM no_such_table'))).rejects.toMatchObject({
        code: 'CHAINLAKE_QUERY_REFUSED',
        message: expect.stringMatching(/^Catalog Error: .*no_such_table/),
      });
      // A value DuckDB cannot cast in a row past the first chunk (2,048 rows), met as the result streams: a code,
      // DuckDB's words, its error as cause; the lake reads on.
      const failed = await collect(l.query(`SELECT CAST(CASE WHEN range < 5000 THEN '1' ELSE 'x' || range END AS INTEGER) AS n FROM range(6000)`)).catch(
        (e: unknown) => e,
      );
      expect(failed).toBeInstanceOf(ChainlakeError);
      expect(failed).toMatchObject({ code: 'CHAINLAKE_QUERY_FAILED', message: expect.stringMatching(/^Conversion Error: .*'x5000'/) });
      expect((failed as Error).cause).toMatchObject({ message: (failed as Error).message });
      expect(ERROR_CODES).toContain('CHAINLAKE_QUERY_FAILED');
      // One that fails past what DuckDB runs ahead of the reader (the node-api ends such a stream as if complete:
      // 447,488 of 700,000 rows here before the end row): the rows read so far come, then the error, never a quiet end.
      let read = 0;
      const late = await (async () => {
        for await (const batch of l.queryArrow(`SELECT CAST(CASE WHEN range = 699000 THEN 'x' ELSE range::VARCHAR END AS INTEGER) AS n FROM range(700000)`))
          read += batch.numRows;
      })().catch((e: unknown) => e);
      expect(late).toMatchObject({ code: 'CHAINLAKE_QUERY_FAILED', message: /stopped before its last row/ });
      expect(read).toBeGreaterThan(0);
      expect(read).toBeLessThan(699000);
      // A whole result ends with its last row, without the end row or its column: ORDER BY and column names kept.
      const whole = await collect(l.query(`SELECT CAST(range AS INTEGER) AS n, CAST(range % 3 AS INTEGER) AS m FROM range(5000) ORDER BY m DESC, n`));
      expect(whole.length).toBe(5000);
      expect(Object.keys(whole[0]!)).toEqual(['n', 'm']);
      expect(whole[0]).toEqual({ n: 2, m: 2 });
      expect(whole[4999]).toEqual({ n: 4998, m: 0 });
      // A second query while the first still streams (one connection): refused with a code, the first unharmed.
      const first = l.query('SELECT transaction_hash FROM transactions ORDER BY transaction_hash');
      expect((await first.next()).value).toEqual({ transaction_hash: lakeRows[0]!.transaction_hash });
      await expect(collect(l.query('SELECT 1'))).rejects.toMatchObject({ code: 'CHAINLAKE_USAGE', message: /still being read/ });
      expect((await collect(first)).length).toBe(lakeRows.length - 1);
    } finally {
      await l.close();
    }
  });

  it("streams a dataset without a lake as Arrow batches with the lake's types and rows", async () => {
    const windows: number[] = [];
    const batches = await collect(streamDataset(request, { batchRows: 100, onWindow: (w) => windows.push(w.rows) }));
    expect(batches.length).toBeGreaterThan(1);
    expect(batches.every((b) => b.numRows <= 100 + 2048)).toBe(true);
    const streamed = digest(batches);
    expect(streamed.size).toBe(windows.reduce((a, b) => a + b, 0));

    const l = await openLake(path.join(dir, 'lake'));
    try {
      const fromLake = await collect(l.queryArrow('SELECT * FROM transactions'));
      // The same schema, field for field (names, Arrow types, order): the same conversion as the lake's.
      expect(batches[0]!.schema.fields.map((f) => `${f.name}: ${f.type}`)).toEqual(fromLake[0]!.schema.fields.map((f) => `${f.name}: ${f.type}`));
      expect(batches[0]!.schema.fields.find((f) => f.name === 'value')!.type.toString()).toBe('Decimal[38e0]');
      expect(String(batches[0]!.schema.fields.find((f) => f.name === 'timestamp')!.type)).toBe('Timestamp<MICROSECOND, UTC>');
      // And the same rows.
      expect(streamed).toEqual(digest(fromLake));
      const first = lakeRows[0]!;
      expect(streamed.get(first.transaction_hash as string)!.split('|')[1]).toBe(String(first.value));
    } finally {
      await l.close();
    }
  });

  it('refuses a damaged catalog with the code and the one fix, catalog rebuild', async () => {
    const damaged = path.join(dir, 'damaged');
    await cp(path.join(dir, 'lake'), damaged, { recursive: true });
    // The catalog's header overwritten: DuckDB no longer takes the file for a database.
    await writeFile(path.join(damaged, 'catalog.duckdb'), Buffer.alloc(4096, 0xa5), { flag: 'r+' });
    const refused = openLake(damaged);
    await expect(refused).rejects.toMatchObject({ code: 'CHAINLAKE_CATALOG_DAMAGED', message: expect.stringContaining('not a valid DuckDB database file') });
    await expect(refused).rejects.toMatchObject({ hint: expect.stringContaining(`chainlake catalog rebuild --lake ${damaged}`) });
  });

  it("a window no setting lets it fetch fails with a code a program acts on, in a run's report and in a stream", async () => {
    // #13 on testnet is served by the alternate host alone (docs/api-assumptions.md): named nowhere, its windows
    // fail before any request, for a person to fix with a setting.
    const request: DatasetRequest = {
      dataset: 'internal_transactions',
      network: 'testnet',
      spec: { transactions: [`0x${'ab'.repeat(32)}`] },
      // An empty URL is none, whatever CHAINLAKE_TESTNET_ALT_URL says.
      endpoints: { testnet: sim.urls.testnet, testnetAlt: '' },
      apiKey: sim.apiKey,
    };
    const report = await exportDataset({ ...request, lake: path.join(dir, 'no-alternate') });
    expect(report.status).toBe('failed');
    expect(report.errors).toEqual([expect.objectContaining({ code: 'CHAINLAKE_USAGE', error: expect.stringContaining('no alternate base URL') })]);
    // A stream ends with the window's error, its id in front, and keeps its code and hint.
    const streamed = collect(streamDataset(request));
    await expect(streamed).rejects.toBeInstanceOf(ChainlakeError);
    await expect(streamed).rejects.toMatchObject({
      code: 'CHAINLAKE_USAGE',
      message: expect.stringMatching(/^internal_transactions\b.*: transaction_internal_transactions: .*no alternate base URL/),
      hint: expect.stringContaining('CHAINLAKE_TESTNET_ALT_URL'),
    });
  });

  it.runIf(unprivilegedCanRun())('reads a read-only copy of a moved lake, through views of its new place', async () => {
    const moved = path.join(dir, 'moved');
    await cp(path.join(dir, 'lake'), moved, { recursive: true });
    await lockDown(moved, 0o555);
    // The original place is gone: rows read now can only come from the copy.
    await rename(path.join(dir, 'lake'), path.join(dir, 'gone'));
    await chmod(dir, 0o755);
    // As root, modes stop nobody: the reader then runs as an unprivileged user, as a shared mount's reader would.
    const script = `
      const { openLake } = await import(${JSON.stringify(path.resolve('dist/index.js'))});
      const lake = await openLake(${JSON.stringify(moved)});
      let n;
      for await (const row of lake.query('SELECT count(*) AS n FROM transactions')) n = Number(row.n);
      await lake.close();
      process.stdout.write(JSON.stringify({ movedFrom: lake.movedFrom, n }));`;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 60_000, ...unprivileged(), cwd: '/' });
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ movedFrom: path.join(dir, 'lake'), n: lakeRows.length });
    await lockDown(moved, 0o755);
  });
});
