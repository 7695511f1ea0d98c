// Throughput of the simulator: 1000-row pages of the whale over loopback with undici.

import { Worker } from 'node:worker_threads';
import { Pool } from 'undici';
import { startSimulator, type RunningSimulator, type Scale } from './index.js';

export interface BenchOptions {
  /** How long to fetch, in seconds (default 5). */
  seconds?: number;
  scale?: Scale;
  seed?: number;
  /** Requests in flight (default 4). */
  concurrency?: number;
  /** Parse every page as JSON like a real client (default true). */
  parse?: boolean;
  /** Use an already running simulator instead of starting one. */
  sim?: RunningSimulator;
  /** Or a base URL + key + whale of a simulator in another process (e.g. `chainlake simulate`). */
  remote?: { mainnet: string; apiKey: string; whale: string };
  /** Run the simulator on this thread instead of a worker thread (always so when running from .ts sources). */
  inProcess?: boolean;
}

interface Remote {
  mainnet: string;
  apiKey: string;
  whale: string;
}

async function startWorker(opts: BenchOptions): Promise<{ remote: Remote; stop: () => Promise<void> }> {
  const worker = new Worker(new URL('./bench-worker.js', import.meta.url), { workerData: { scale: opts.scale ?? 'small', seed: opts.seed ?? 1 } });
  const remote = await new Promise<Remote>((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  return {
    remote,
    stop: async () => {
      const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
      worker.postMessage('close');
      const t = setTimeout(() => void worker.terminate(), 5000);
      await exited;
      clearTimeout(t);
    },
  };
}

export interface BenchResult {
  rowsPerSecond: number;
  requests: number;
  seconds: number;
  rows: number;
  /** CPU seconds this process (client and, unless remote, server) used; rows / cpuSeconds is load-independent. */
  cpuSeconds: number;
}

const OPEN_BRACE = 0x7b;
const PAGE_END = Buffer.from(']}}', 'latin1');

/**
 * Rows of a transaction page without decoding it, chunk by chunk as it arrives (no concatenation): the
 * envelope holds two objects and each row one, with no braces inside (no input field). Still checks that the
 * page is whole: the closing bytes are there and the rows are as many as the envelope's `count` implies for
 * this offset and the 1000-row limit.
 */
async function countPageRows(body: AsyncIterable<Buffer>, offset: number): Promise<number> {
  let braces = 0,
    count = -1;
  let head = '';
  let tail: Buffer = Buffer.alloc(0);
  for await (const chunk of body) {
    for (let i = chunk.indexOf(OPEN_BRACE); i >= 0; i = chunk.indexOf(OPEN_BRACE, i + 1)) braces++;
    if (count < 0 && head.length < 200) {
      head += chunk.subarray(0, 200).toString('latin1');
      const m = /^\{"status":"200","message":"OK","results":\{"count":"(\d+)"/.exec(head);
      if (m) count = Number(m[1]);
    }
    tail = chunk.length >= 3 ? chunk.subarray(chunk.length - 3) : Buffer.concat([tail, chunk]).subarray(-3);
  }
  const rows = braces - 2;
  const expected = Math.max(0, Math.min(1000, count - offset));
  if (count < 0 || !tail.equals(PAGE_END) || rows !== expected) {
    throw new Error(`bench: incomplete page (count ${count}, offset ${offset}, ${rows} rows, ends with '${tail.toString('latin1')}')`);
  }
  return rows;
}

/** The simulator a bench fetches from, and how to stop what the bench started for it. */
interface BenchTarget {
  /** The mainnet base URL. */
  base: string;
  apiKey: string;
  whale: string;
  stop(): Promise<void>;
}

/** Rows and requests fetched so far, shared by the requests in flight. */
interface Tally {
  requests: number;
  rows: number;
}

export async function benchSimulator(opts: BenchOptions = {}): Promise<BenchResult> {
  const target = await benchTarget(opts);
  const url = new URL(target.base);
  const pool = new Pool(url.origin, { connections: opts.concurrency ?? 4, pipelining: 1 });
  const basePath = url.pathname.replace(/\/$/, '');
  const prefix = basePath + `/v1/accounts/${target.whale}/transactions?limit=1000`;
  const seconds = opts.seconds ?? 5;
  const nextPath = whaleWindows(prefix, await latestBlock(pool, basePath, target.apiKey));
  const tally: Tally = { requests: 0, rows: 0 };
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const deadline = t0 + seconds * 1000;
  let elapsedEnd = 0;
  try {
    const fetcher = () => fetchPages(pool, target.apiKey, nextPath, opts.parse ?? true, deadline, tally);
    await Promise.all(Array.from({ length: opts.concurrency ?? 4 }, fetcher));
    elapsedEnd = performance.now();
  } finally {
    await pool.close();
    await target.stop();
  }
  const elapsed = (elapsedEnd - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const { requests, rows } = tally;
  return { rowsPerSecond: Math.round(rows / elapsed), requests, seconds: elapsed, rows, cpuSeconds: (cpu.user + cpu.system) / 1e6 };
}

/**
 * The simulator given (in this process or another), else one started for the bench: on a worker thread when
 * running from the build, so that client and server each have a thread; on this one from .ts sources.
 */
async function benchTarget(opts: BenchOptions): Promise<BenchTarget> {
  const useWorker = !opts.sim && !opts.remote && !opts.inProcess && !import.meta.url.endsWith('.ts');
  const own = opts.sim || opts.remote || useWorker ? undefined : await startSimulator({ scale: opts.scale ?? 'small', seed: opts.seed ?? 1 });
  const threaded = useWorker ? await startWorker(opts) : undefined;
  const sim = opts.sim ?? own;
  const remote = opts.remote ?? threaded?.remote;
  return {
    base: remote?.mainnet ?? sim!.urls.mainnet,
    apiKey: remote?.apiKey ?? sim!.apiKey,
    whale: remote?.whale ?? sim!.examples.whale,
    stop: async () => {
      if (own) await own.close();
      if (threaded) await threaded.stop();
    },
  };
}

async function latestBlock(pool: Pool, basePath: string, apiKey: string): Promise<number> {
  const r = await pool.request({ path: basePath + '/v1/blocks/latest', method: 'GET', headers: { 'api-key': apiKey } });
  return Number(((await r.body.json()) as { results: { data: { block_number: string } } }).results.data.block_number);
}

/** The next page to fetch: the whale's history in block windows small enough for the result window, newest first. */
function whaleWindows(prefix: string, head: number): () => { path: string; offset: number } {
  const windowBlocks = 2000;
  let cursor = 0;
  return () => {
    const w = Math.floor(cursor / 3),
      page = cursor % 3;
    cursor++;
    const end = head - ((w * windowBlocks) % head);
    const start = Math.max(0, end - windowBlocks + 1);
    return { path: `${prefix}&startBlock=${start}&endBlock=${end}&offset=${page * 1000}`, offset: page * 1000 };
  };
}

/** One request in flight until the deadline, page after page, counted in `tally`. */
async function fetchPages(
  pool: Pool,
  apiKey: string,
  nextPath: () => { path: string; offset: number },
  parse: boolean,
  deadline: number,
  tally: Tally,
): Promise<void> {
  while (performance.now() < deadline) {
    const { path, offset } = nextPath();
    const r = await pool.request({ path, method: 'GET', headers: { 'api-key': apiKey } });
    if (r.statusCode !== 200) throw new Error(`bench: HTTP ${r.statusCode} from simulator`);
    if (parse) {
      const j = (await r.body.json()) as { results: { data: unknown[] } };
      tally.rows += j.results.data.length;
    } else {
      const n = await countPageRows(r.body, offset); // not `tally.rows += await …`: that reads rows before awaiting
      tally.rows += n;
    }
    tally.requests++;
  }
}
