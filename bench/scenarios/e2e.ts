import os from 'node:os';
import { benchSimulator } from '../../src/simulator/bench.js';
import { runExport } from '../lib/export.js';
import { target, type Context, type ScenarioResult } from '../lib/result.js';
import { startSimProcess } from '../lib/simproc.js';
import { buildWorkload, describeWorkload } from '../lib/workload.js';

/** 1. End to end: ≥ 1M rows of three datasets from a simulator in its own process, no latency, no limit. */
export async function e2e(ctx: Context): Promise<Omit<ScenarioResult, 'seconds'>> {
  const sim = await startSimProcess({ scale: ctx.quick ? 'small' : 'large' });
  try {
    const w = await buildWorkload(sim.info, ctx.quick ? 10_000 : 1_000_000, ['transactions', 'erc20_transfers', 'event_logs'], ctx.quick ? 6000 : undefined);
    ctx.log(`workload: ${w.rows} rows: ${describeWorkload(w)}`);
    // The machine's limit beside us: the same server process answering a client that only parses.
    const ref = await benchSimulator({
      remote: { mainnet: sim.info.mainnet, apiKey: sim.info.apiKey, whale: sim.info.examples.whale },
      seconds: ctx.quick ? 1 : 5,
      concurrency: 4,
    });
    const run = await runExport(sim, w, ctx.tmp);
    const rows = run.report.totals.rows;
    const rps = rows / (run.child.wallMs / 1000);
    return {
      scenario: 'e2e',
      title: 'end to end: simulator process -> chainlake run -> lake',
      measured: {
        rows,
        'wall seconds (process start to exit)': run.child.wallMs / 1000,
        'rows/s': rps,
        requests: run.report.totals.requests,
        'peak RSS MB': run.child.peakRssBytes / 2 ** 20,
        'CPU seconds of the exporting process': run.child.cpuSeconds,
        'rows per CPU-second (load-independent)': rows / run.child.cpuSeconds,
        // The simulator shares the machine's cores: with the exporter's CPU it bounds the wall time from below.
        'CPU seconds of the simulator process': run.serverCpuSeconds,
        'rows/s if both processes kept every core busy': rows / ((run.child.cpuSeconds + run.serverCpuSeconds) / os.availableParallelism()),
        'partition files': run.report.totals.files,
      },
      references: { 'simulator alone, parsing client, 4 in flight: rows/s': ref.rowsPerSecond },
      targets: [
        target('end-to-end rows/s', rps, '>=', 100_000, 'rows/s', ctx.quick),
        ...(ctx.quick ? [] : [target('rows exported', rows, '>=', 1_000_000, 'rows', false)]),
      ],
      notes: [describeWorkload(w)],
    };
  } finally {
    await sim.stop();
  }
}
