import { readFileSync } from 'node:fs';
import { benchSimulator } from '../../src/simulator/bench.js';
import { target, type Context, type ScenarioResult } from '../lib/result.js';
import { startSimProcess } from '../lib/simproc.js';

/** CPU seconds (user + system) and RSS in MB of a process, from /proc; undefined where there is no /proc. */
function procUsage(pid: number): { cpuSeconds: number; rssMB: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const rssKB = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN);
    return { cpuSeconds: (Number(f[11]) + Number(f[12])) / 100, rssMB: rssKB / 1024 };
  } catch {
    return undefined;
  }
}

/** 7. The simulator itself: rows served per second, 1000-row pages over loopback, server in its own process. */
export async function simulator(ctx: Context): Promise<Omit<ScenarioResult, 'seconds'>> {
  const sim = await startSimProcess({ scale: ctx.quick ? 'small' : 'large' });
  try {
    const remote = { mainnet: sim.info.mainnet, apiKey: sim.info.apiKey, whale: sim.info.examples.whale };
    const seconds = ctx.quick ? 1 : 10;
    const before = procUsage(sim.pid);
    // The client counts rows without parsing, so the figure is the server's and not the client's JSON.parse.
    const raw = await benchSimulator({ remote, seconds, concurrency: 4, parse: false });
    const after = procUsage(sim.pid);
    const parsed = await benchSimulator({ remote, seconds: ctx.quick ? 1 : 5, concurrency: 4, parse: true });
    // The wall-clock figure depends on what else the two cores run; rows per CPU-second of the server
    // process (its user + system time, so the kernel's loopback work too) and of the client do not.
    const references: Record<string, number | string> = {
      'rows/s with a client that JSON.parses every page': parsed.rowsPerSecond,
      'rows per CPU-second of the bench client (no parse)': Math.round(raw.rows / raw.cpuSeconds),
    };
    const measured: Record<string, number | string> = { 'rows/s served': raw.rowsPerSecond, requests: raw.requests };
    if (before && after) {
      measured['rows per server CPU-second'] = Math.round(raw.rows / (after.cpuSeconds - before.cpuSeconds));
      measured['server RSS after serving (MB)'] = Math.round(after.rssMB);
    }
    return {
      scenario: 'simulator',
      title: 'simulator: rows served per second (1000-row pages, loopback, 4 connections)',
      measured,
      references,
      targets: [target('rows served/s', raw.rowsPerSecond, '>=', 200_000, 'rows/s', ctx.quick)],
      notes: [],
    };
  } finally {
    await sim.stop();
  }
}
