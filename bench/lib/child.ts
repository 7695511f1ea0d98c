// Runs a chainlake command in a child process and measures it from outside: wall time, and peak RSS from
// /proc/<pid>/status (VmHWM, the kernel's high-water mark) sampled until the process exits.

import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { CLI } from './paths.js';

export interface ChildResult {
  code: number | null;
  wallMs: number;
  /** Peak resident set of the child, in bytes (0 where /proc is not available). */
  peakRssBytes: number;
  /** CPU seconds (user + system, all threads) of the child, as last sampled before it exited. */
  cpuSeconds: number;
  stdout: string;
  stderr: string;
}

/** utime + stime of a process from /proc/<pid>/stat, in seconds (clock ticks of 1/100 s on Linux). */
export async function cpuOf(pid: number): Promise<number | undefined> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return undefined;
  }
}

async function vmHwm(pid: number): Promise<number> {
  try {
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    const m = /^VmHWM:\s+(\d+)\s+kB/m.exec(status);
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/**
 * Node options for the measured chainlake process alone (not the bench or the simulator), split on spaces: how a
 * V8 flag or a preload is compared with the same build without it (docs/performance.md, "How to compare two
 * builds"). NODE_OPTIONS would reach every process and refuses most V8 flags.
 */
export const NODE_ARGS_ENV = 'BENCH_NODE_ARGS';

function nodeArgs(): string[] {
  return (process.env[NODE_ARGS_ENV] ?? '').split(' ').filter((a) => a !== '');
}

export async function runChainlake(args: string[], env: NodeJS.ProcessEnv = {}): Promise<ChildResult> {
  const t0 = performance.now();
  const child = spawn(process.execPath, [...nodeArgs(), CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr = (stderr + d).slice(-20_000)));
  let peak = 0;
  let cpu = 0;
  let exited = false;
  const code = new Promise<number | null>((resolve) =>
    child.once('exit', (c) => {
      exited = true;
      resolve(c);
    }),
  );
  // VmHWM only grows, so the last sample before exit is the peak up to then; 20 ms apart misses little.
  const sampler = (async () => {
    while (!exited) {
      peak = Math.max(peak, await vmHwm(child.pid!));
      cpu = (await cpuOf(child.pid!)) ?? cpu;
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  const c = await code;
  const wallMs = performance.now() - t0;
  await sampler;
  return { code: c, wallMs, peakRssBytes: peak, cpuSeconds: cpu, stdout, stderr };
}
