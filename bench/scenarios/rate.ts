import { queryLake, runExport } from '../lib/export.js';
import { target, type Context, type ScenarioResult } from '../lib/result.js';
import { startSimProcess } from '../lib/simproc.js';
import { buildWorkload, describeWorkload } from '../lib/workload.js';

const R = 50;

/** 3. Rate ceiling: the server allows R = 50 requests/s per key (429 above), latency 20-80 ms; chainlake --rps 50. */
export async function rate(ctx: Context): Promise<Omit<ScenarioResult, 'seconds'>> {
  const sim = await startSimProcess({ scale: ctx.quick ? 'small' : 'large', rateLimit: R, latencyMs: '20-80' });
  try {
    const w = await buildWorkload(sim.info, ctx.quick ? 10_000 : 800_000, ['transactions', 'erc20_transfers', 'event_logs'], ctx.quick ? 6000 : undefined);
    ctx.log(`workload: ${w.rows} rows: ${describeWorkload(w)}`);
    const run = await runExport(sim, w, ctx.tmp, { rps: R });
    const s = run.server;
    const achieved = s.lastAt > s.firstAt ? s.requestsInSpan / ((s.lastAt - s.firstAt) / 1000) : 0;
    const windows = await queryLake(run.lake, 'SELECT rows_expected, requests FROM windows');
    const minimum = windows.reduce((a, r) => a + Math.max(1, Math.ceil(Number(r.rows_expected) / 1000)), 0);
    const rows = run.report.totals.rows;
    const ratio = s.requests / minimum;
    return {
      scenario: 'rate',
      title: `rate ceiling: server limit ${R} req/s, latency 20-80 ms, --rps ${R}`,
      measured: {
        rows,
        'requests (server)': s.requests,
        'fetch seconds (first to last request)': (s.lastAt - s.firstAt) / 1000,
        'requests/s': achieved,
        '429s': s.rateLimited,
        'requests per row': s.requests / rows,
      },
      references: { 'limit R req/s': R, 'minimum requests (ceil(count/1000) per window)': minimum, 'minimum requests per row': minimum / rows },
      targets: [
        target('achieved rate / R', achieved / R, '>=', 0.95, '×', ctx.quick),
        target('429 responses', s.rateLimited, '<=', 0, '', ctx.quick),
        target('requests / minimum', ratio, '<=', 1.05, '×', ctx.quick),
      ],
      notes: [describeWorkload(w)],
    };
  } finally {
    await sim.stop();
  }
}
