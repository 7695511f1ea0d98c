import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseJob } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { fetchAllPages } from '../helpers/api.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';

let sim: RunningSimulator;
let lake: string;
let cleanup: () => Promise<void>;
let addresses: string[];

beforeAll(async () => {
  sim = await startSimulator({ seed: 7 });
  ({ dir: lake, cleanup } = await tempDir());
  addresses = sim.examples.addresses.slice(0, 3);
});

afterAll(async () => {
  await sim?.close();
  await cleanup?.();
});

const job = () => parseJob({ name: 'e2e', target: 'simulator', lake, concurrency: 4, datasets: { transactions: { addresses } } }, 'e2e-test', process.env);

describe('transactions end to end (simulator -> lake -> DuckDB)', () => {
  it('writes typed, partitioned DuckLake Parquet files that match the API exactly', async () => {
    const report = await runJob(job(), { simulator: sim });
    expect(report.status).toBe('complete');
    expect(report.totals.rows).toBeGreaterThan(0);
    expect(report.totals.rejects).toBe(0);

    const partitions = await readdir(path.join(lake, 'main', 'transactions', 'network=mainnet'));
    expect(partitions.length).toBeGreaterThan(1);
    for (const p of partitions) {
      expect(p).toMatch(/^block_date=\d{4}-\d{2}-\d{2}$/);
      // One file per partition, under an immutable DuckLake name.
      expect(await readdir(path.join(lake, 'main', 'transactions', 'network=mainnet', p))).toEqual([expect.stringMatching(/^ducklake-[0-9a-f-]+\.parquet$/)]);
    }

    const types = Object.fromEntries((await queryCatalog(lake, 'DESCRIBE transactions')).map((r) => [r.column_name as string, r.column_type as string]));
    expect(types).toMatchObject({
      block_number: 'BIGINT',
      timestamp: 'TIMESTAMP WITH TIME ZONE',
      value: 'DECIMAL(38,0)',
      value_raw: 'VARCHAR',
      tx_status: 'BOOLEAN',
      sender: 'VARCHAR',
      transaction_hash: 'VARCHAR',
      _run_id: 'VARCHAR',
      _ingested_at: 'TIMESTAMP WITH TIME ZONE',
      network: 'VARCHAR',
      block_date: 'DATE',
    });

    // The API's own rows, read independently, deduplicated by transaction hash.
    const api = new Map<string, Record<string, unknown>>();
    for (const a of addresses) {
      for (const e of await fetchAllPages(`${sim.urls.mainnet}/v1/accounts/${a}/transactions`, sim.apiKey, { endBlock: report.head! })) {
        api.set(String(e.transaction_hash).toLowerCase(), e);
      }
    }
    const [agg] = await queryCatalog(
      lake,
      `SELECT count(*)::BIGINT AS n, count(DISTINCT transaction_hash)::BIGINT AS keys, sum(value)::VARCHAR AS total,
              count(*) FILTER (WHERE sender <> lower(sender) OR receiver <> lower(receiver) OR transaction_hash <> lower(transaction_hash))::BIGINT AS upper
       FROM transactions`,
    );
    expect(Number(agg!.n)).toBe(api.size);
    expect(Number(agg!.keys)).toBe(api.size);
    expect(Number(agg!.upper)).toBe(0);
    const exact = [...api.values()]
      .map((e) => (e.value === null ? 0n : BigInt(e.value as string)))
      .filter((v) => v < 10n ** 38n)
      .reduce((a, b) => a + b, 0n);
    expect(BigInt(agg!.total as string)).toBe(exact);

    const raws = await queryCatalog(lake, `SELECT transaction_hash, value_raw FROM transactions WHERE value_raw IS NOT NULL`);
    for (const r of raws) expect(r.value_raw).toBe(api.get(r.transaction_hash as string)!.value);
    const bigOnes = [...api.values()].filter((e) => e.value !== null && BigInt(e.value as string) >= 10n ** 38n);
    expect(raws.length).toBe(bigOnes.length);

    // Spot-check a row field by field against the API.
    const sample = [...api.values()][0]!;
    const [row] = await queryCatalog(
      lake,
      `SELECT *, strftime(timestamp, '%Y-%m-%dT%H:%M:%SZ') AS ts, block_date::VARCHAR AS bd FROM transactions WHERE transaction_hash = '${String(sample.transaction_hash).toLowerCase()}'`,
    );
    expect(row!.block_number).toBe(BigInt(sample.block_number as string));
    expect(row!.ts).toBe(sample.timestamp);
    expect(row!.tx_status).toBe(sample.tx_status === '1');
    expect(row!.sender).toBe(String(sample.sender).toLowerCase());
    expect(row!.bd).toBe(String(sample.timestamp).slice(0, 10));
  });

  it('re-running the same job adds no duplicate row', async () => {
    const [before] = await queryCatalog(lake, 'SELECT count(*)::BIGINT AS n FROM transactions');
    const report = await runJob(job(), { simulator: sim });
    expect(report.status).toBe('complete');
    const [after] = await queryCatalog(lake, 'SELECT count(*)::BIGINT AS n, count(DISTINCT transaction_hash)::BIGINT AS k FROM transactions');
    expect(after!.n).toBe(before!.n);
    expect(after!.k).toBe(after!.n);
    const runs = await queryCatalog(lake, `SELECT count(*)::BIGINT AS n FROM runs WHERE status = 'complete'`);
    expect(runs[0]!.n).toBe(2n);
    const windows = await queryCatalog(lake, `SELECT count(*)::BIGINT AS n FROM windows WHERE status = 'committed' AND rows_got = rows_expected`);
    expect(windows[0]!.n).toBe(BigInt(addresses.length * 2));
  });
});
