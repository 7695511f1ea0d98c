import { spawn } from 'node:child_process';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PlanningState } from '../../src/load/state.js';
import { windowKey } from '../../src/load/state.js';
import { advanceWatermark } from '../../src/load/ledger/watermarks.js';
import { loadJobFile, parseJob, type Job } from '../../src/pipeline/job.js';
import { blockChunks, planWindows } from '../../src/pipeline/plan.js';
import { committedRanges, covers, narrowWindows } from '../../src/pipeline/prepare.js';
import { runJob } from '../../src/pipeline/run.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { fingerprint } from '../reliability/fingerprint.js';
import { CLI, onJsonLines, runCliInProcess, type CliResult } from '../helpers/cli.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';

/**
 * Block-ranged windows are cut into aligned chunks of `range.windowBlocks` and run chunk by chunk: planning
 * and ordering, incremental narrowing across chunk boundaries, resume, watermarks through chunks committed
 * out of order, and the same lake whatever the chunk size.
 */

const A = (i: number): string => `0x${i.toString(16).padStart(40, '0')}`;
const jobOf = (datasets: Record<string, unknown>, range: Record<string, unknown> = {}): Job =>
  parseJob({ name: 'chunks', target: 'simulator', range, datasets }, 'inline', {});

describe('planning chunks', () => {
  it('aligns chunks to multiples of windowBlocks and clips them to the range', () => {
    expect(blockChunks({ from: 0, to: 250 }, 100)).toEqual([
      { from: 0, to: 99 },
      { from: 100, to: 199 },
      { from: 200, to: 250 },
    ]);
    expect(blockChunks({ from: 150, to: 420 }, 100)).toEqual([
      { from: 150, to: 199 },
      { from: 200, to: 299 },
      { from: 300, to: 399 },
      { from: 400, to: 420 },
    ]);
    expect(blockChunks({ from: 7, to: 7 }, 100)).toEqual([{ from: 7, to: 7 }]);
    expect(blockChunks({ from: 0, to: 99 }, 100)).toEqual([{ from: 0, to: 99 }]);
    expect(blockChunks({ from: 5, to: 9 }, 1)).toHaveLength(5);
    expect(() => blockChunks({ from: 0, to: 9 }, 0)).toThrow(/positive integer/);
  });

  it('orders windows chunk by chunk; snapshots stay in the first pass; ids stay put when the head moves', () => {
    const j = jobOf(
      { transactions: { addresses: [A(1), A(2)] }, balances: { addresses: [A(3)] }, erc20_transfers: { addresses: [A(1)] } },
      { windowBlocks: 100 },
    );
    const w = planWindows(j.what, 250);
    expect(w.map((x) => `${x.def.name}:${x.scope.address ?? x.scope.addresses}:${x.range ? `${x.range.from}-${x.range.to}` : 'snapshot'}`)).toEqual([
      `transactions:${A(1)}:0-99`,
      `transactions:${A(2)}:0-99`,
      `balances:${A(3)}:snapshot`,
      `erc20_transfers:${A(1)}:0-99`,
      `transactions:${A(1)}:100-199`,
      `transactions:${A(2)}:100-199`,
      `erc20_transfers:${A(1)}:100-199`,
      `transactions:${A(1)}:200-250`,
      `transactions:${A(2)}:200-250`,
      `erc20_transfers:${A(1)}:200-250`,
    ]);
    expect(new Set(w.map((x) => x.id)).size).toBe(w.length);
    expect(w[0]!.id).toBe(`transactions/mainnet/address=${A(1)}/0-99`);
    // A later head adds to the last chunk and new chunks; every full chunk keeps its id (resume keys).
    const later = planWindows(j.what, 420).map((x) => x.id);
    for (const id of w.map((x) => x.id).filter((id) => !id.endsWith('-250'))) expect(later).toContain(id);
    expect(later).toContain(`transactions/mainnet/address=${A(1)}/200-299`);

    // The default chunk (100,000 blocks) leaves a range that fits in one chunk as one window per scope.
    const one = jobOf({ transactions: { addresses: [A(1)] }, balances: { addresses: [A(3)] } });
    expect(one.what.range.windowBlocks).toBe(100_000);
    expect(planWindows(one.what, 36_000).map((x) => x.range)).toEqual([{ from: 0, to: 36_000 }, undefined]);
    // A head below the first block: no block-ranged window at all, snapshots still.
    expect(planWindows(jobOf({ transactions: { addresses: [A(1)] }, balances: { addresses: [A(3)] } }, { fromBlock: 500 }).what, 100)).toHaveLength(1);
  });

  it('narrows incremental chunks from the watermark minus the margin, across a chunk boundary', () => {
    const j = jobOf({ transactions: { addresses: [A(1)] } }, { incremental: true, safetyMarginBlocks: 64, windowBlocks: 100 });
    const key = `transactions|mainnet|address=${A(1)}`;
    const narrow = (wm: number | undefined, margin = 64): { ranges: string[]; skipped: number } => {
      const state: PlanningState = { watermarks: new Map(wm === undefined ? [] : [[key, wm]]) };
      const { todo, skipped } = narrowWindows({ ...j.what, range: { ...j.what.range, safetyMarginBlocks: margin } }, 350, state, false, false);
      return { ranges: todo.map((w) => `${w.range!.from}-${w.range!.to}`), skipped };
    };
    expect(narrow(undefined)).toEqual({ ranges: ['0-99', '100-199', '200-299', '300-350'], skipped: 0 });
    // Watermark 150, margin 64: refetch from 87, which lies in the chunk below the watermark's.
    expect(narrow(150)).toEqual({ ranges: ['87-99', '100-199', '200-299', '300-350'], skipped: 0 });
    expect(narrow(299, 0)).toEqual({ ranges: ['300-350'], skipped: 3 });
    expect(narrow(299)).toEqual({ ranges: ['236-299', '300-350'], skipped: 2 });
    // A scope at the head has nothing to do, not even its margin.
    expect(narrow(350)).toEqual({ ranges: [], skipped: 4 });
    // --full-refresh ignores the watermark.
    const full = narrowWindows(j.what, 350, { watermarks: new Map([[key, 350]]) }, false, true);
    expect(full.todo).toHaveLength(4);
    // Narrowed windows carry ids of their own range.
    expect(narrowWindows(j.what, 350, { watermarks: new Map([[key, 150]]) }, false, false).todo[0]!.id).toBe(`transactions/mainnet/address=${A(1)}/87-99`);
  });

  it('a resumed run skips chunks its predecessor committed, even when the watermark moved meanwhile', () => {
    const j = jobOf({ transactions: { addresses: [A(1)] } }, { incremental: true, safetyMarginBlocks: 64, windowBlocks: 100 });
    const scope = `address=${A(1)}`;
    const key = `transactions|mainnet|${scope}`;
    // The killed run started at watermark 150 and committed [87-99], [100-199] (watermark now 199) and [300-350].
    const committed = new Set([
      windowKey('transactions', 'mainnet', scope, 87, 99),
      windowKey('transactions', 'mainnet', scope, 100, 199),
      windowKey('transactions', 'mainnet', scope, 300, 350),
    ]);
    const state: PlanningState = { watermarks: new Map([[key, 199]]), resume: { runId: 'r', status: 'running', head: 350, committed } };
    const { todo, skipped } = narrowWindows(j.what, 350, state, true, false);
    // [136-199] (the chunk narrowed by the new watermark) lies inside the committed [100-199].
    expect(todo.map((w) => `${w.range!.from}-${w.range!.to}`)).toEqual(['200-299']);
    expect(skipped).toBe(3);
    expect(committedRanges(committed)).toEqual(
      new Map([
        [
          key,
          [
            { from: 87, to: 99 },
            { from: 100, to: 199 },
            { from: 300, to: 350 },
          ],
        ],
      ]),
    );
    expect(
      covers(
        [
          { from: 0, to: 49 },
          { from: 50, to: 120 },
        ],
        { from: 10, to: 99 },
      ),
    ).toBe(true);
    expect(
      covers(
        [
          { from: 0, to: 49 },
          { from: 51, to: 120 },
        ],
        { from: 10, to: 99 },
      ),
    ).toBe(false);
  });

  it('a watermark moves through chunks committed out of order, never over a gap', () => {
    const c1 = { from: 0, to: 99 };
    const c2 = { from: 100, to: 199 };
    const c3 = { from: 200, to: 299 };
    // Batch 1 holds chunk 2 only: no watermark yet (nothing from the first block).
    expect(advanceWatermark(undefined, 0, [c2])).toEqual({ mark: undefined, rest: [c2] });
    // Batch 2 holds chunk 1: the watermark reaches the end of chunk 2.
    expect(advanceWatermark(undefined, 0, [c2, c1])).toEqual({ mark: 199, rest: [] });
    expect(advanceWatermark(99, 0, [c3])).toEqual({ mark: 99, rest: [c3] });
    expect(advanceWatermark(99, 0, [c3, c2])).toEqual({ mark: 299, rest: [] });
    // A margin refetch below the watermark neither moves it nor is kept.
    expect(advanceWatermark(150, 0, [{ from: 87, to: 99 }])).toEqual({ mark: 150, rest: [] });
    // A job starting at block 50: its first chunk starts there.
    expect(advanceWatermark(undefined, 50, [{ from: 50, to: 99 }])).toEqual({ mark: 99, rest: [] });
    expect(advanceWatermark(undefined, 50, [{ from: 51, to: 99 }]).mark).toBeUndefined();
  });
});

/** A loopback proxy in front of the simulator that can hold or fail the requests of one block range. */
class ChunkProxy {
  private server!: Server;
  private port = 0;
  /** Requests for `startBlock` = this wait until `release()`. */
  holdStart: number | undefined;
  /** Requests for `startBlock` = this get an HTTP 400. */
  failStart: number | undefined;
  /** `startBlock` values seen, in order. */
  readonly starts: number[] = [];
  private released!: () => void;
  private releasedP = new Promise<void>((r) => (this.released = r));
  /** Called with each startBlock as it arrives. */
  onStart: (start: number) => void = () => undefined;

  constructor(private readonly target: string) {}

  async start(): Promise<void> {
    const t = new URL(this.target);
    this.server = createServer((req, res) => {
      const url = new URL(req.url!, 'http://x');
      const s = url.searchParams.get('startBlock');
      const start = s === null ? undefined : Number(s);
      const forward = (): void => {
        const up = request({ host: t.hostname, port: t.port, path: req.url, method: req.method, headers: req.headers }, (r) => {
          res.writeHead(r.statusCode!, r.headers);
          r.pipe(res);
        });
        up.on('error', () => res.destroy());
        req.pipe(up);
      };
      if (start !== undefined) {
        this.starts.push(start);
        this.onStart(start);
      }
      if (start !== undefined && start === this.failStart) {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ status: '0', message: 'chunk refused by the test proxy' }));
      } else if (start !== undefined && start === this.holdStart) void this.releasedP.then(forward);
      else forward();
    });
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.port = (this.server.address() as AddressInfo).port;
  }

  release(): void {
    this.released();
  }

  /** The simulator's URLs with mainnet through this proxy. */
  urls(sim: RunningSimulator): RunningSimulator['urls'] {
    const t = new URL(this.target);
    return { ...sim.urls, mainnet: `http://127.0.0.1:${this.port}${t.pathname}` };
  }

  async close(): Promise<void> {
    this.release();
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

describe('runs in chunks (simulator, DuckDB)', () => {
  let sim: RunningSimulator;
  let dir: string;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    sim = await startSimulator({ seed: 1 });
    ({ dir, cleanup } = await tempDir());
  });
  afterAll(async () => {
    await sim?.close();
    await cleanup?.();
  });

  /**
   * The first two example addresses' transactions over the whole chain, exported once in one run: the lake a run
   * resumed after a failure or a kill must end with (whatever its chunks: the fingerprint holds rows only).
   */
  let cleanOnce: Promise<string> | undefined;
  const cleanLake = (): Promise<string> =>
    (cleanOnce ??= (async () => {
      const lake = path.join(dir, 'clean');
      const job = parseJob(
        {
          name: 'clean',
          target: 'simulator',
          lake,
          concurrency: 2,
          range: { fromBlock: 0 },
          datasets: { transactions: { addresses: sim.examples.addresses.slice(0, 2) } },
        },
        'inline',
        {},
      );
      expect((await runJob(job, { simulator: sim })).status).toBe('complete');
      return lake;
    })());

  const datasets = (): Record<string, unknown> => ({
    transactions: { addresses: [sim.examples.whale, ...sim.examples.addresses.slice(0, 2)] },
    erc20_transfers: { addresses: sim.examples.addresses.slice(0, 2) },
    internal_transactions: { addresses: sim.examples.addresses.slice(0, 1) },
    balances: { addresses: sim.examples.addresses.slice(0, 3) },
  });

  it('small chunks give exactly the lake one window per scope gives', async () => {
    const fromBlock = sim.head() - 9000;
    const run = (name: string, windowBlocks: number) =>
      runJob(
        parseJob(
          { name, target: 'simulator', lake: path.join(dir, name), concurrency: 4, range: { fromBlock, windowBlocks }, datasets: datasets() },
          'inline',
          {},
        ),
        { simulator: sim },
      );
    const chunked = await run('chunked', 4000);
    const whole = await run('whole', 1_000_000_000);
    expect(chunked.status).toBe('complete');
    expect(whole.status).toBe('complete');
    // 6 block-ranged scopes over the aligned chunks of 4000 blocks of [head-9000, head]; one balances call
    // (addresses are batched by 20).
    const chunks = Math.floor(sim.head() / 4000) - Math.floor(fromBlock / 4000) + 1;
    expect(chunked.totals.windows).toBe(6 * chunks + 1);
    expect(whole.totals.windows).toBe(6 + 1);
    expect(chunked.totals.rows).toBe(whole.totals.rows);
    expect(chunked.totals.rows).toBeGreaterThan(20_000);
    // The whale's full chunks still exceed the API's result window: splitting works inside a chunk.
    const whale = await queryCatalog(path.join(dir, 'chunked'), `SELECT max(splits)::INT AS s FROM windows WHERE scope = 'address=${sim.examples.whale}'`);
    expect(whale[0]!.s).toBeGreaterThan(0);
    const a = await fingerprint(path.join(dir, 'chunked'));
    const b = await fingerprint(path.join(dir, 'whole'));
    expect(Object.keys(a).sort()).toEqual(['balances', 'erc20_transfers', 'internal_transactions', 'transactions']);
    expect(a).toEqual(b);
    // Windows are recorded per chunk, their ranges tile the job's range per scope, and every scope's
    // watermark is the head.
    const tiles = await queryCatalog(
      path.join(dir, 'chunked'),
      `SELECT scope, count(*)::INT AS n, min(from_block)::BIGINT AS lo, max(to_block)::BIGINT AS hi, (sum(to_block - from_block + 1))::BIGINT AS blocks
       FROM windows WHERE dataset = 'transactions' GROUP BY scope`,
    );
    for (const t of tiles) expect(t).toMatchObject({ n: chunks, lo: BigInt(fromBlock), hi: BigInt(sim.head()), blocks: BigInt(sim.head() - fromBlock + 1) });
    const marks = await queryCatalog(path.join(dir, 'chunked'), 'SELECT DISTINCT block FROM watermarks');
    expect(marks).toEqual([{ block: BigInt(sim.head()) }]);
  });

  it('a watermark advances through chunks committed out of order within a run', async () => {
    // Chunk 1 is held at the proxy until chunk 3 is asked for; with two windows in flight, chunk 3 starts only
    // once chunk 2 finished, so chunk 2 is committed (one batch per window) before chunk 1.
    const proxy = new ChunkProxy(sim.urls.mainnet);
    await proxy.start();
    try {
      const W = 5000;
      proxy.holdStart = 0;
      proxy.onStart = (s) => {
        if (s === 2 * W) proxy.release();
      };
      const lake = path.join(dir, 'out-of-order');
      const job = parseJob(
        {
          name: 'ooo',
          target: 'simulator',
          lake,
          concurrency: 2,
          commit: { everyRows: 1 },
          range: { incremental: true, fromBlock: 0, windowBlocks: W },
          datasets: { transactions: { addresses: sim.examples.addresses.slice(0, 1) } },
        },
        'inline',
        {},
      );
      const report = await runJob(job, { simulator: { urls: proxy.urls(sim), apiKey: sim.apiKey } });
      expect(report.status).toBe('complete');
      const chunks = Math.floor(sim.head() / W) + 1;
      expect(report.totals.windows).toBe(chunks);
      // Chunk 3 was asked for before chunk 1 was answered: the proof that chunk 2 finished first.
      expect(proxy.starts.indexOf(2 * W)).toBeGreaterThan(proxy.starts.indexOf(W));
      const perWindow = await queryCatalog(lake, `SELECT from_block, rows_got FROM windows ORDER BY from_block`);
      expect(perWindow.slice(0, 3).every((w) => Number(w.rows_got) > 0)).toBe(true);
      const commits = await queryCatalog(lake, 'SELECT count(*)::INT AS n FROM commits');
      expect(commits[0]!.n).toBeGreaterThan(1);
      // Under the old rule (a window moves the watermark only if it continues it in its own batch) this stayed
      // at the end of chunk 1.
      expect(await queryCatalog(lake, 'SELECT block FROM watermarks')).toEqual([{ block: BigInt(sim.head()) }]);
    } finally {
      await proxy.close();
    }
  });

  it('a resumed run fills the gap below a committed chunk and moves the watermark through it', async () => {
    const proxy = new ChunkProxy(sim.urls.mainnet);
    await proxy.start();
    try {
      const W = 10_000;
      const lake = path.join(dir, 'gap');
      const job = parseJob(
        {
          name: 'gap',
          target: 'simulator',
          lake,
          concurrency: 2,
          range: { incremental: true, fromBlock: 0, windowBlocks: W },
          datasets: { transactions: { addresses: sim.examples.addresses.slice(0, 2) } },
        },
        'inline',
        {},
      );
      const chunks = Math.floor(sim.head() / W) + 1;
      // Run 1: the first chunk of every scope fails, the rest commit; no scope gets a watermark (nothing from block 0).
      proxy.failStart = 0;
      const first = await runJob(job, { simulator: { urls: proxy.urls(sim), apiKey: sim.apiKey } });
      expect(first.status).toBe('partial');
      expect(first.totals.windowsFailed).toBe(2);
      expect(await queryCatalog(lake, 'SELECT * FROM watermarks')).toEqual([]);
      // Run 2 resumes: it fetches only the failed chunks, and the watermark reaches the head through the chunks
      // run 1 committed.
      proxy.failStart = undefined;
      const second = await runJob(job, { simulator: { urls: proxy.urls(sim), apiKey: sim.apiKey } });
      expect(second.status).toBe('complete');
      expect(second.resumeOf).toBe(first.runId);
      expect(second.totals.windows).toBe(2);
      expect(second.windowsSkipped).toBe(2 * (chunks - 1));
      expect(await queryCatalog(lake, 'SELECT DISTINCT block FROM watermarks')).toEqual([{ block: BigInt(sim.head()) }]);

      expect(await fingerprint(lake)).toEqual(await fingerprint(await cleanLake()));
    } finally {
      await proxy.close();
    }
  });

  it('a re-run after SIGKILL skips the chunks already committed and ends with the same lake', async () => {
    const file = path.join(dir, 'killed.json');
    const lake = path.join(dir, 'killed');
    // A commit per window, so that the kill lands between commits; the clean run commits as a run does by default
    // (the fingerprint does not depend on how rows were batched into commits).
    const doc = (l: string, perWindow = true) => ({
      name: 'killed',
      target: 'simulator',
      simulator: { seed: 1 },
      lake: l,
      concurrency: 2,
      ...(perWindow ? { commit: { everyRows: 1 } } : {}),
      range: { fromBlock: 0, windowBlocks: 6000 },
      datasets: { transactions: { addresses: sim.examples.addresses.slice(0, 2) } },
    });
    await writeFile(file, JSON.stringify(doc(lake)));
    // Kill right after the 4th commit (one window each), so some chunks are in the lake and some are not.
    const killed = await new Promise<string>((resolve, reject) => {
      const child = spawn(process.execPath, [CLI, 'run', file, '--log-format', 'json'], { stdio: ['ignore', 'ignore', 'pipe'] });
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error('no 4th commit within 120 s'));
      }, 120_000);
      let runId = '';
      let commits = 0;
      onJsonLines(child.stderr, (ev) => {
        if (ev.event === 'run.start') runId = String(ev.runId);
        if (ev.event === 'commit' && ++commits === 4) child.kill('SIGKILL');
      });
      child.on('close', (_c, signal) => {
        clearTimeout(timer);
        if (signal === 'SIGKILL') resolve(runId);
        else reject(new Error('the run ended before its 4th commit'));
      });
    });
    const done = await queryCatalog(lake, `SELECT count(*)::INT AS n FROM windows WHERE run_id = '${killed}' AND status = 'committed'`);
    const n = done[0]!.n as number;
    expect(n).toBeGreaterThanOrEqual(4);
    const chunks = Math.floor(sim.head() / 6000) + 1;
    expect(n).toBeLessThan(2 * chunks);

    // The re-run commits as a run does by default (a commit per window is only there to place the kill): it
    // resumes all the same, and a commit per window would make it the slowest part of this file.
    await writeFile(file, JSON.stringify(doc(lake, false)));
    const resumed = await runJob(await loadJobFile(file, process.env), { simulator: sim });
    expect(resumed.status).toBe('complete');
    expect(resumed.resumeOf).toBe(killed);
    expect(resumed.windowsSkipped).toBe(n);
    expect(resumed.totals.windows).toBe(2 * chunks - n);
    expect(await readdir(path.join(lake, '_staging')).catch(() => [])).toEqual([]);
    // Every chunk of every scope is committed exactly once over the two runs.
    const per = await queryCatalog(
      lake,
      `SELECT count(*)::INT AS n, count(DISTINCT (scope, from_block, to_block))::INT AS d FROM windows WHERE status = 'committed'`,
    );
    expect(per[0]).toEqual({ n: 2 * chunks, d: 2 * chunks });

    expect(await fingerprint(lake)).toEqual(await fingerprint(await cleanLake()));
    // A child process, a resumed run and DuckDB on a shared two-core box: bounded, but not by the default minute.
  }, 240_000);
});

/**
 * `chainlake <args>` in this process with what the command writes to stdout (a plan prints there itself, which
 * runCliInProcess does not catch): the stream is restored before this returns.
 */
async function runCliCapturingStdout(args: string[]): Promise<CliResult> {
  let printed = '';
  const write = process.stdout.write.bind(process.stdout);
  process.stdout.write = ((chunk: string | Uint8Array) => {
    printed += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString();
    return true;
  }) as typeof process.stdout.write;
  try {
    const r = await runCliInProcess(args);
    return { ...r, stdout: r.stdout + printed };
  } finally {
    process.stdout.write = write;
  }
}

describe('windowBlocks on the command line', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  beforeAll(async () => ({ dir, cleanup } = await tempDir()));
  afterAll(async () => cleanup?.());

  it('plan --window-blocks cuts the windows; a bad value is a usage error', async () => {
    const file = path.join(dir, 'plan.json');
    await writeFile(
      file,
      JSON.stringify({
        name: 'plan',
        target: 'simulator',
        lake: path.join(dir, 'lake'),
        datasets: {
          transactions: { addresses: ['0x36b8f7473cdaa8441b4aa383dd6757c5603d8b8c'] },
          balances: { addresses: ['0x36b8f7473cdaa8441b4aa383dd6757c5603d8b8c'] },
        },
      }),
    );
    const r = await runCliCapturingStdout(['plan', file, '--window-blocks', '10000', '--format', 'json']);
    expect(r.code, r.stderr).toBe(0);
    const plan = JSON.parse(r.stdout) as { head: number; windowBlocks: number; windows: { window: string; rows: number | null }[] };
    expect(plan.windowBlocks).toBe(10_000);
    // Small chain: head 36000, so chunks 0-9999, 10000-19999, 20000-29999, 30000-36000, and the snapshot.
    expect(plan.windows.map((w) => w.window.split('/').pop())).toEqual(['0-9999', 'snapshot', '10000-19999', '20000-29999', `30000-${plan.head}`]);
    expect(plan.windows.filter((w) => w.window.startsWith('transactions')).reduce((a, w) => a + (w.rows ?? 0), 0)).toBe(426);

    const text = await runCliCapturingStdout(['plan', file, '--window-blocks', '10000']);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toMatch(/in chunks of 10000/);
    expect(text.stdout).toMatch(/5 windows to fetch/);

    for (const bad of ['0', '-5', '1.5']) {
      // A usage error, decided by the parser before the command runs: in this process.
      const b = await runCliInProcess(['plan', file, '--window-blocks', bad]);
      expect(b.code, b.stderr).toBe(2);
      expect(b.stderr).toMatch(/--window-blocks must be an integer from 1/);
    }
  });
});
