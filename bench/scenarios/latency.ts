import path from 'node:path';
import { mkdir } from 'node:fs/promises';
import { runExport } from '../lib/export.js';
import { target, type Context, type ScenarioResult } from '../lib/result.js';
import { startSimProcess } from '../lib/simproc.js';
import { rangeWorkload } from '../lib/workload.js';

/**
 * 4. Latency hiding: 100 ms per request, no limit, --concurrency 1, 4 and 16. Pages of 100 rows keep the run
 * latency-bound (16 in flight x 10 pages/s x 1000 rows would be 160k rows/s, a CPU question that scenario 1
 * answers); the workload grows with the concurrency so every run fetches for a similar time.
 */
export async function latency(ctx: Context): Promise<Omit<ScenarioResult, 'seconds'>> {
  const sim = await startSimProcess({ scale: ctx.quick ? 'small' : 'large', latencyMs: '100' });
  const pageSize = 100;
  const seconds = ctx.quick ? 0.5 : 8;
  const levels = [1, 4, 16];
  const measured: Record<string, number> = {};
  const targets = [];
  try {
    let base = 0;
    for (const c of levels) {
      // 10 pages/s per request in flight at 100 ms.
      const rows = Math.round(c * 10 * pageSize * seconds);
      const w = await rangeWorkload(sim.info, { dataset: 'transactions', address: sim.info.examples.whale }, rows);
      const dir = path.join(ctx.tmp, `c${c}`);
      await mkdir(dir, { recursive: true });
      const run = await runExport(sim, w, dir, { concurrency: c, pageSize });
      const s = run.server;
      const fetchSec = (s.lastAt - s.firstAt) / 1000;
      const rps = run.report.totals.rows / fetchSec;
      ctx.log(`concurrency ${c}: ${run.report.totals.rows} rows, ${s.requests} requests in ${fetchSec.toFixed(2)} s: ${Math.round(rps)} rows/s`);
      measured[`c=${c} rows`] = run.report.totals.rows;
      measured[`c=${c} requests`] = s.requests;
      measured[`c=${c} rows/s (fetch phase)`] = rps;
      if (c === 1) base = rps;
      else {
        measured[`c=${c} speed-up`] = rps / base;
        targets.push(target(`c=${c} rows/s vs ${c} x c=1`, rps / (c * base), '>=', 0.8, '×', ctx.quick));
      }
    }
  } finally {
    await sim.stop();
  }
  return {
    scenario: 'latency',
    title: 'latency hiding: 100 ms per request, --concurrency 1, 4, 16 (whale transactions, 100-row pages)',
    measured,
    references: { 'ideal at c=1 (1 page / 100 ms): rows/s': 1000 },
    targets,
    notes: ['fetch phase = first to last request seen by the server (polled every 25 ms)'],
  };
}
