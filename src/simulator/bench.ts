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

export async function benchSimulator(opts: BenchOptions = {}): Promise<BenchResult> {
  const useWorker = !opts.sim && !opts.remote && !opts.inProcess && !import.meta.url.endsWith('.ts');
  const own = opts.sim || opts.remote || useWorker ? undefined : await startSimulator({ scale: opts.scale ?? 'small', seed: opts.seed ?? 1 });
  const threaded = useWorker ? await startWorker(opts) : undefined;
  const sim = opts.sim ?? own;
  const remote = opts.remote ?? threaded?.remote;
  const base = remote?.mainnet ?? sim!.urls.mainnet;
  const apiKey = remote?.apiKey ?? sim!.apiKey;
  const whale = remote?.whale ?? sim!.examples.whale;
  const url = new URL(base);
  const pool = new Pool(url.origin, { connections: opts.concurrency ?? 4, pipelining: 1 });
  const prefix = url.pathname.replace(/\/$/, '') + `/v1/accounts/${whale}/transactions?limit=1000`;
  const parse = opts.parse ?? true;
  const seconds = opts.seconds ?? 5;
  // Walk the whale's history in block windows small enough for the result window, newest first.
  const head = Number(
    (
      (await (
        await pool.request({ path: url.pathname.replace(/\/$/, '') + '/v1/blocks/latest', method: 'GET', headers: { 'api-key': apiKey } })
      ).body.json()) as { results: { data: { block_number: string } } }
    ).results.data.block_number,
  );
  const windowBlocks = 2000;
  let cursor = 0;
  const nextPath = (): { path: string; offset: number } => {
    const w = Math.floor(cursor / 3),
      page = cursor % 3;
    cursor++;
    const end = head - ((w * windowBlocks) % head);
    const start = Math.max(0, end - windowBlocks + 1);
    return { path: `${prefix}&startBlock=${start}&endBlock=${end}&offset=${page * 1000}`, offset: page * 1000 };
  };
  let requests = 0,
    rows = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const deadline = t0 + seconds * 1000;
  const worker = async (): Promise<void> => {
    while (performance.now() < deadline) {
      const { path, offset } = nextPath();
      const r = await pool.request({ path, method: 'GET', headers: { 'api-key': apiKey } });
      if (r.statusCode !== 200) throw new Error(`bench: HTTP ${r.statusCode} from simulator`);
      if (parse) {
        const j = (await r.body.json()) as { results: { data: unknown[] } };
        rows += j.results.data.length;
      } else {
        const n = await countPageRows(r.body, offset); // not `rows += await …`: that reads rows before awaiting
        rows += n;
      }
      requests++;
    }
  };
  let elapsedEnd = 0;
  try {
    await Promise.all(Array.from({ length: opts.concurrency ?? 4 }, worker));
    elapsedEnd = performance.now();
  } finally {
    await pool.close();
    if (own) await own.close();
    if (threaded) await threaded.stop();
  }
  const elapsed = (elapsedEnd - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  return { rowsPerSecond: Math.round(rows / elapsed), requests, seconds: elapsed, rows, cpuSeconds: (cpu.user + cpu.system) / 1e6 };
}
