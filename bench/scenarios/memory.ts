import path from 'node:path';
import { mkdir } from 'node:fs/promises';
import { MB, runExport } from '../lib/export.js';
import { target, type Context, type ScenarioResult } from '../lib/result.js';
import { startSimProcess } from '../lib/simproc.js';
import { buildWorkload, describeWorkload } from '../lib/workload.js';

/** 5. Memory: peak RSS (VmHWM) of the exporting process for 1M and 5M rows. */
export async function memory(ctx: Context): Promise<Omit<ScenarioResult, 'seconds'>> {
  const sim = await startSimProcess({ scale: ctx.quick ? 'small' : 'large' });
  const sizes = ctx.quick ? [5_000, 20_000] : [1_000_000, 5_000_000];
  const measured: Record<string, number> = {};
  const notes: string[] = [];
  const peaks: number[] = [];
  try {
    for (const n of sizes) {
      const w = await buildWorkload(sim.info, n, undefined, ctx.quick ? 6000 : undefined);
      const dir = path.join(ctx.tmp, `rows-${n}`);
      await mkdir(dir, { recursive: true });
      const run = await runExport(sim, w, dir);
      const label = `${(n / 1e6).toString()}M`;
      measured[`${label}: rows`] = run.report.totals.rows;
      measured[`${label}: seconds`] = run.child.wallMs / 1000;
      measured[`${label}: peak RSS MB`] = run.child.peakRssBytes / MB;
      peaks.push(run.child.peakRssBytes);
      notes.push(`${label}: ${describeWorkload(w)}`);
      ctx.log(`${run.report.totals.rows} rows: peak RSS ${(run.child.peakRssBytes / MB).toFixed(0)} MB in ${(run.child.wallMs / 1000).toFixed(1)} s`);
    }
  } finally {
    await sim.stop();
  }
  const growth = (peaks[1]! - peaks[0]!) / peaks[0]!;
  return {
    scenario: 'memory',
    title: 'memory: peak RSS of the exporting process, 1M and 5M rows',
    measured: { ...measured, 'growth 1M -> 5M %': growth * 100 },
    references: {},
    targets: [target('peak RSS at 5M', peaks[1]! / MB, '<', 400, 'MB', ctx.quick), target('RSS growth 1M -> 5M', growth * 100, '<', 20, '%', ctx.quick)],
    notes,
  };
}
