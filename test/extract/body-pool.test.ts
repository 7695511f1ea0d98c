import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { BODY_POOL_KEEP_BYTES, bodyPoolStats, drainBodyPool, readBody, releaseBody } from '../../src/extract/body-pool.js';
import { scanList } from '../../src/extract/scan.js';
import { DATASETS } from '../../src/datasets/registry.js';
import { PageFiles } from '../../src/load/write/staging.js';
import { parseJob } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { streamJobBatches } from '../../src/pipeline/stream.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { RowTransformer } from '../../src/transform/rows.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';

// Response bodies are read into buffers that serve the next body once staging has written them
// (src/extract/body-pool.ts): a buffer given back too early would put another page's bytes into the lake.

let dir: string;
let cleanup: () => Promise<void>;
let sim: RunningSimulator;

beforeAll(async () => {
  ({ dir, cleanup } = await tempDir('chainlake-body-pool-'));
  sim = await startSimulator({ seed: 3 });
});
afterAll(async () => {
  await sim?.close();
  await cleanup?.();
});
beforeEach(() => drainBodyPool());

/** A body as a server sends it: `bytes` in chunks of `chunk` bytes. */
async function* chunks(bytes: Buffer, chunk: number): AsyncGenerator<Buffer> {
  for (let at = 0; at < bytes.length; at += chunk) yield bytes.subarray(at, at + chunk);
}

const body = (n: number, fill: number): Buffer => Buffer.alloc(n, fill);

describe('readBody', () => {
  it('reads a body of unknown length whole, in a buffer grown as it comes, and one whose length a server understated', async () => {
    const sent = Buffer.from(Array.from({ length: 300_000 }, (_, i) => i % 251));
    expect((await readBody(chunks(sent, 16_384), undefined)).equals(sent)).toBe(true);
    expect((await readBody(chunks(sent, 65_536), 1000)).equals(sent)).toBe(true);
    expect((await readBody(chunks(Buffer.alloc(0), 1), undefined)).length).toBe(0);
    // A Content-Length of a terabyte (a broken server) takes no terabyte before the body's bytes come.
    const small = await readBody(chunks(sent, 65_536), 2 ** 40);
    expect(small.equals(sent)).toBe(true);
    expect(small.buffer.byteLength).toBeLessThanOrEqual(16 * 1024 * 1024);
  });

  it('lends a buffer given back to the next body, once: a second give-back of the same body is ignored', async () => {
    const a = await readBody(chunks(body(70_000, 1), 10_000), 70_000);
    releaseBody({ bytes: a, entriesAt: [], entries: [] });
    const b = await readBody(chunks(body(70_000, 2), 10_000), 70_000);
    expect(b.buffer).toBe(a.buffer);
    // `a` given back again while `b` holds its buffer: lending it to `c` would put c's bytes into b.
    releaseBody({ bytes: a, entriesAt: [], entries: [] });
    const c = await readBody(chunks(body(70_000, 3), 10_000), 70_000);
    expect(c.buffer).not.toBe(b.buffer);
    expect(b.every((x) => x === 2)).toBe(true);
    // A body given back twice is kept once: two later bodies never share a buffer.
    releaseBody({ bytes: c, entriesAt: [], entries: [] });
    releaseBody({ bytes: c, entriesAt: [], entries: [] });
    const [d, e] = [await readBody(chunks(body(70_000, 4), 10_000), 70_000), await readBody(chunks(body(70_000, 5), 10_000), 70_000)];
    expect(d.buffer).not.toBe(e.buffer);
  });

  it('keeps at most BODY_POOL_KEEP_BYTES of spare buffers, and none once drained', async () => {
    const size = 4 * 1024 * 1024;
    const n = BODY_POOL_KEEP_BYTES / size + 2;
    const bodies = [];
    for (let i = 0; i < n; i++) bodies.push(await readBody(chunks(body(size, i), size), size));
    for (const b of bodies) releaseBody({ bytes: b, entriesAt: [], entries: [] });
    const reused = bodyPoolStats.reused;
    for (let i = 0; i < n; i++) await readBody(chunks(body(size, i), size), size);
    expect(bodyPoolStats.reused - reused).toBe(BODY_POOL_KEEP_BYTES / size);
    drainBodyPool();
    const before = bodyPoolStats.reused;
    await readBody(chunks(body(size, 0), size), size);
    expect(bodyPoolStats.reused).toBe(before);
  });

  it('a page read after its body was given back is a bug error, not the next body read in its place', async () => {
    const text = JSON.stringify({ results: { data: [{ hash: '0xaa' }, { hash: '0xbb' }] } });
    const bytes = await readBody(chunks(Buffer.from(text), 7), undefined);
    const list = scanList(bytes, ['results', 'data'], ['hash'])!;
    expect(list.value(1, 0)).toBe('0xbb');
    releaseBody({ bytes, entriesAt: ['results', 'data'], entries: [], list });
    expect(() => list.value(1, 0)).toThrow(/read after staging gave its buffer back.*a bug in chainlake/);
    expect(() => list.parse()).toThrow(/a bug in chainlake/);
  });
});

describe('staging pooled bodies', () => {
  it('gives a body back only once it is written: pages staged faster than the disk takes them each land once', async () => {
    // Pages small enough that the file stream buffers them (no backpressure, writePage returns before the
    // write): a body given back at that point would be overwritten by the next one before reaching the file.
    const def = DATASETS.event_logs!;
    const t = new RowTransformer(def, { network: 'mainnet', snapshotDate: '2026-01-15' });
    const files = new PageFiles(path.join(dir, 'pages', 'event_logs', '1'));
    const sent: string[] = [];
    for (let p = 0; p < 200; p++) {
      const entries = Array.from({ length: 3 }, (_, i) => ({
        timestamp: '2024-03-01T00:00:12Z',
        transaction_hash: `0x${(p * 3 + i).toString(16).padStart(64, '0')}`,
        log_index: String(i),
        address: `0x${'cd'.repeat(20)}`,
      }));
      const text = JSON.stringify({ status: '1', results: { data: entries } });
      sent.push(text);
      const bytes = await readBody(chunks(Buffer.from(text), 100), undefined);
      const raw = { bytes, entriesAt: ['results', 'data'], entries };
      const accepted = t.acceptRaw(entries, { scope: {}, results: {}, offset: p * 3, raw });
      await files.writePage(accepted!, raw);
    }
    await files.close();
    const staged = (await Promise.all(files.files.map((f) => readFile(f.file, 'utf8')))).join('').split('\n').filter(Boolean);
    expect(staged.map((line) => JSON.stringify((JSON.parse(line) as { b: unknown }).b))).toEqual(sent);
    // The pool was used: most bodies went into a buffer an earlier page had given back.
    expect(bodyPoolStats.reused).toBeGreaterThan(100);
  });
});

describe('a stream', () => {
  it('gives its bodies back, and keeps no spare buffer once its windows are fetched', async () => {
    const job = parseJob(
      {
        name: 'pool-stream',
        target: 'simulator',
        lake: path.join(dir, 'unused'),
        pageSize: 50,
        range: { fromBlock: 0 },
        datasets: { transactions: { addresses: sim.examples.addresses.slice(0, 2) } },
      },
      'inline',
      {},
    );
    let rows = 0;
    const { reused } = bodyPoolStats;
    for await (const batch of streamJobBatches(job, { simulator: sim })) rows += batch.numRows;
    expect(rows).toBeGreaterThan(100);
    expect(bodyPoolStats.reused - reused).toBeGreaterThan(0);
    // Drained when the stream stopped receiving: the next body takes a new buffer.
    const before = bodyPoolStats.reused;
    await readBody(chunks(body(1000, 1), 1000), 1000);
    expect(bodyPoolStats.reused).toBe(before);
  });
});

describe('a run', () => {
  it('reads its bodies into buffers used again, and its lake holds each row once', async () => {
    const lake = path.join(dir, 'lake');
    const job = parseJob(
      {
        name: 'pool',
        target: 'simulator',
        lake,
        concurrency: 4,
        pageSize: 50,
        range: { fromBlock: 0 },
        datasets: { transactions: { addresses: sim.examples.addresses.slice(0, 4) }, erc20_transfers: { addresses: sim.examples.addresses.slice(0, 4) } },
      },
      'inline',
      {},
    );
    const { lent, reused } = bodyPoolStats;
    const report = await runJob(job, { simulator: sim });
    expect(report.errors).toEqual([]);
    const requests = report.datasets.reduce((n, d) => n + d.requests, 0);
    expect(bodyPoolStats.lent - lent).toBeGreaterThanOrEqual(requests);
    expect(bodyPoolStats.reused - reused).toBeGreaterThan(requests / 2);
    for (const table of ['transactions', 'erc20_transfers']) {
      const key = DATASETS[table]!.naturalKey.join(', ');
      const [row] = await queryCatalog(
        lake,
        `SELECT (SELECT count(*) FROM ${table})::INTEGER AS n, count(*)::INTEGER AS keys FROM (SELECT DISTINCT ${key} FROM ${table})`,
      );
      expect(row!.n).toBeGreaterThan(100);
      expect(row!.keys).toBe(row!.n);
    }
  });
});
