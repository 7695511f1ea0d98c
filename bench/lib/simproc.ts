// The simulator in a process of its own (`chainlake simulate`), so that the exporting process measured by a
// scenario shares no event loop or heap with the server.

import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { CLI } from './paths.js';

export interface SimInfo {
  mainnet: string;
  apiKey: string;
  examples: { whale: string; erc20Token: string; erc721Token: string; nftHolder: string; addresses: string[]; pools: string[] };
}

export interface SimStats {
  requests: number;
  rowsServed: number;
  rateLimited: number;
  /** Requests per route (the simulator's own names: an explorer module and action, a finance endpoint). */
  byRoute: Record<string, number>;
}

export interface SimProcess {
  info: SimInfo;
  pid: number;
  stats(): Promise<SimStats>;
  stop(): Promise<void>;
}

export interface SimFlags {
  scale: 'small' | 'medium' | 'large';
  seed?: number;
  latencyMs?: string;
  rateLimit?: number;
}

export async function startSimProcess(flags: SimFlags): Promise<SimProcess> {
  const args = [CLI, 'simulate', '--scale', flags.scale, '--seed', String(flags.seed ?? 1), '--port', '0'];
  if (flags.latencyMs) args.push('--latency-ms', flags.latencyMs);
  if (flags.rateLimit) args.push('--rate-limit', String(flags.rateLimit));
  const child: ChildProcess = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout! });
  const first = await Promise.race([
    new Promise<string>((resolve) => lines.once('line', resolve)),
    once(child, 'exit').then(([code]) => {
      throw new Error(`chainlake simulate exited with ${code} before printing its URLs`);
    }),
  ]);
  const info = JSON.parse(first) as SimInfo;
  const statsUrl = new URL('/_sim/stats', info.mainnet).href;
  return {
    info,
    pid: child.pid!,
    stats: async () => (await (await fetch(statsUrl)).json()) as SimStats,
    stop: async () => {
      if (child.exitCode !== null) return;
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(t);
    },
  };
}
