import { mkdir } from 'node:fs/promises';
import { runExport, queryLake } from '../lib/export.js';
import { target, type Context, type ScenarioResult } from '../lib/result.js';
import { startSimProcess } from '../lib/simproc.js';
import { buildWorkload, describeWorkload } from '../lib/workload.js';

/**
 * Decoding in the export run (issue 24): the same event-log export (ERC-20 Transfer logs of the busy tokens)
 * with and without `"decode": {"standard": ["erc20"]}`, each into a fresh lake, alternately; the best run of
 * each is compared (rows/s of exported logs, process start to exit).
 */
export async function decode(ctx: Context): Promise<Omit<ScenarioResult, 'seconds'>> {
  const sim = await startSimProcess({ scale: ctx.quick ? 'small' : 'large' });
  try {
    const w = await buildWorkload(sim.info, ctx.quick ? 20_000 : 300_000, ['event_logs'], ctx.quick ? 20_000 : undefined);
    ctx.log(`workload: ${w.rows} rows: ${describeWorkload(w)}`);
    const rounds = ctx.quick ? 1 : 2;
    const plain: number[] = [];
    const decoded: number[] = [];
    let decodedRows = 0;
    for (let i = 0; i < rounds; i++) {
      await mkdir(`${ctx.tmp}/plain-${i}`, { recursive: true });
      await mkdir(`${ctx.tmp}/decode-${i}`, { recursive: true });
      const a = await runExport(sim, w, `${ctx.tmp}/plain-${i}`);
      plain.push(a.report.totals.rows / (a.child.wallMs / 1000));
      ctx.log(`without decoding: ${a.report.totals.rows} rows in ${(a.child.wallMs / 1000).toFixed(2)} s`);
      const b = await runExport(sim, w, `${ctx.tmp}/decode-${i}`, { extra: { decode: { standard: ['erc20'] } } });
      decoded.push(b.report.totals.rows / (b.child.wallMs / 1000));
      decodedRows = Number((await queryLake(b.lake, 'SELECT count(*) AS n FROM erc20_transfer_events'))[0]!.n);
      ctx.log(`with decoding: ${b.report.totals.rows} rows in ${(b.child.wallMs / 1000).toFixed(2)} s, ${decodedRows} decoded`);
      if (decodedRows !== b.report.totals.rows) throw new Error(`bench: ${decodedRows} decoded rows for ${b.report.totals.rows} exported logs`);
    }
    const best = (xs: number[]): number => Math.max(...xs);
    const ratio = best(decoded) / best(plain);
    return {
      scenario: 'decode',
      title: 'export with decoding (ERC-20 Transfer) vs the same export without',
      measured: {
        'logs exported': w.rows,
        'decoded rows': decodedRows,
        'rows/s with decoding (best)': best(decoded),
        'rows/s without (best)': best(plain),
        ratio,
      },
      references: {
        'rows/s without decoding, each run': plain.map((x) => Math.round(x)).join(', '),
        'rows/s with decoding, each run': decoded.map((x) => Math.round(x)).join(', '),
      },
      targets: [target('rows/s with decoding / without', ratio, '>=', 0.8, '×', ctx.quick)],
      notes: [describeWorkload(w), 'Wall clock of the whole `chainlake run` process; the machine may be shared (see load average).'],
    };
  } finally {
    await sim.stop();
  }
}
