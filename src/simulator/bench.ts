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

interface Remote { mainnet: string; apiKey: string; whale: string }

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
  rowsPerSecond: number; requests: number; seconds: number; rows: number;
  /** CPU seconds this process (client and, unless remote, server) used; rows / cpuSeconds is load-independent. */
  cpuSeconds: number;
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
  const head = Number((await (await pool.request({ path: url.pathname.replace(/\/$/, '') + '/v1/blocks/latest', method: 'GET', headers: { 'api-key': apiKey } })).body.json() as { results: { data: { block_number: string } } }).results.data.block_number);
  const windowBlocks = 2000;
  let cursor = 0;
  const nextPath = (): string => {
    const w = Math.floor(cursor / 3), page = cursor % 3;
    cursor++;
    const end = head - ((w * windowBlocks) % head);
    const start = Math.max(0, end - windowBlocks + 1);
    return `${prefix}&startBlock=${start}&endBlock=${end}&offset=${page * 1000}`;
  };
  let requests = 0, rows = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const deadline = t0 + seconds * 1000;
  const worker = async (): Promise<void> => {
    while (performance.now() < deadline) {
      const r = await pool.request({ path: nextPath(), method: 'GET', headers: { 'api-key': apiKey } });
      if (r.statusCode !== 200) throw new Error(`bench: HTTP ${r.statusCode} from simulator`);
      if (parse) {
        const j = (await r.body.json()) as { results: { data: unknown[] } };
        rows += j.results.data.length;
      } else {
        const buf = Buffer.from(await r.body.arrayBuffer());
        let n = 0;
        for (let i = buf.indexOf('"timestamp"'); i >= 0; i = buf.indexOf('"timestamp"', i + 1)) n++;
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
