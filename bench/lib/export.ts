// One export measured from outside: `chainlake run <job>` in a child process against the simulator's process.

import path from 'node:path';
import { readFile } from 'node:fs/promises';
import type { RunReport } from '../../src/pipeline/report.js';
import { cpuOf, runChainlake, type ChildResult } from './child.js';
import type { SimProcess } from './simproc.js';
import { jobDoc, writeJob, type JobOptions, type Workload } from './workload.js';

export interface ExportRun {
  child: ChildResult;
  report: RunReport;
  lake: string;
  /** Server-side requests and 429s during the run, and when requests were seen (polled every 25 ms). */
  server: { requests: number; rateLimited: number; rows: number; firstAt: number; lastAt: number; requestsInSpan: number };
  /** CPU seconds the simulator's process used while the export ran (0 where /proc is not available). */
  serverCpuSeconds: number;
}

export async function runExport(sim: SimProcess, w: Workload, dir: string, opts: Omit<JobOptions, 'lake'> & { extraArgs?: string[] } = {}): Promise<ExportRun> {
  const lake = path.join(dir, 'lake');
  const jobFile = path.join(dir, 'job.json');
  const reportFile = path.join(dir, 'report.json');
  await writeJob(jobFile, jobDoc(sim.info, w, { ...opts, lake }));
  const before = await sim.stats();
  const serverCpuBefore = await cpuOf(sim.pid);
  // Poll the server's counters to time the fetch phase alone (first to last request) for rate figures.
  let polling = true;
  let firstAt = 0,
    lastAt = 0,
    firstReq = before.requests,
    lastReq = before.requests;
  const poller = (async () => {
    let prev = before.requests;
    while (polling) {
      const s = await sim.stats();
      const now = performance.now();
      if (s.requests !== prev) {
        if (firstAt === 0) {
          firstAt = now;
          firstReq = s.requests;
        }
        lastAt = now;
        lastReq = s.requests;
        prev = s.requests;
      }
      await new Promise((r) => setTimeout(r, 25));
    }
  })();
  const child = await runChainlake(['run', jobFile, '--quiet', '--report', reportFile, ...(opts.extraArgs ?? [])]);
  polling = false;
  await poller;
  const after = await sim.stats();
  const serverCpuAfter = await cpuOf(sim.pid);
  if (child.code !== 0) throw new Error(`bench: chainlake run exited with ${child.code}\n${child.stdout}\n${child.stderr}`);
  const report = JSON.parse(await readFile(reportFile, 'utf8')) as RunReport;
  return {
    child,
    report,
    lake,
    server: {
      requests: after.requests - before.requests,
      rateLimited: after.rateLimited - before.rateLimited,
      rows: after.rowsServed - before.rowsServed,
      firstAt,
      lastAt,
      requestsInSpan: lastReq - firstReq,
    },
    serverCpuSeconds: serverCpuBefore === undefined || serverCpuAfter === undefined ? 0 : serverCpuAfter - serverCpuBefore,
  };
}

/** Rows of a SQL query over the lake's catalog (`chainlake query --format json`). */
export async function queryLake(lake: string, sql: string): Promise<Record<string, unknown>[]> {
  const r = await runChainlake(['query', '--lake', lake, '--format', 'json', sql]);
  if (r.code !== 0) throw new Error(`bench: chainlake query failed: ${r.stderr}`);
  return r.stdout
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

export const MB = 1024 * 1024;
