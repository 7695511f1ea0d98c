import path from 'node:path';
import { parseJob } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { verifySession } from '../../src/pipeline/verify/session.js';
import { startSimulator } from '../../src/simulator/index.js';
import { target, type Context, type ScenarioResult } from '../lib/result.js';

/**
 * Verify: the requests and time of a full `chainlake verify` of a dense lake, against the requests of the export
 * that wrote it (issue 36: at most 0.1 × the export's). The lake is the dense ERC-20 scope of the simulator's
 * chain of realistic height, exported twice: with the default joined windows, and in fixed 100,000-block chunks
 * (hundreds of committed windows for one scope, which verify asks as one range while they hold). Request counts
 * do not depend on the machine. --quick starts at block 45M.
 */
export async function verify(ctx: Context): Promise<Omit<ScenarioResult, 'seconds'>> {
  const sim = await startSimulator({ seed: 1, chain: 'sparse' });
  try {
    const { dense } = sim.sparseAddresses!;
    const fromBlock = ctx.quick ? 45_000_000 : 0;
    const measure = async (name: string, windowBlocks?: number) => {
      const lake = path.join(ctx.tmp, name);
      const job = parseJob(
        {
          name: `verify-${name}`,
          target: 'simulator',
          lake,
          range: windowBlocks === undefined ? { fromBlock } : { fromBlock, windowBlocks },
          datasets: { erc20_transfers: { addresses: [dense] } },
        },
        'bench verify',
        process.env,
      );
      const report = await runJob(job, { simulator: sim });
      if (report.status !== 'complete') throw new Error(`${name}: export ${report.status}: ${JSON.stringify(report.errors.slice(0, 3))}`);
      const started = performance.now();
      const s = await verifySession(job, { kind: 'local', lake }, {}, { simulator: sim });
      const seconds = (performance.now() - started) / 1000;
      if (!s.holds) throw new Error(`${name}: verify found differences: ${JSON.stringify(s.rows.filter((r) => r.status === 'differs').slice(0, 3))}`);
      const windows = s.rows.filter((r) => r.check === 'count').length;
      ctx.log(
        `${name}: ${report.totals.rows} rows, ${windows} windows: export ${report.totals.requests} requests, verify ${s.requests} in ${seconds.toFixed(1)} s`,
      );
      return { rows: report.totals.rows, windows, exportRequests: report.totals.requests, requests: s.requests, seconds };
    };
    const joined = await measure('joined');
    const chunks = await measure('fixed-chunks', 100_000);
    return {
      scenario: 'verify',
      title: `a full verify of a dense ERC-20 scope (${joined.rows.toLocaleString('en-US')} rows from block ${fromBlock.toLocaleString('en-US')}) against its export's requests`,
      measured: {
        'verify requests (joined windows)': joined.requests,
        'verify seconds (joined windows)': Math.round(joined.seconds * 10) / 10,
        'verify requests (100k-block chunks)': chunks.requests,
        'verify seconds (100k-block chunks)': Math.round(chunks.seconds * 10) / 10,
        'windows (100k-block chunks)': chunks.windows,
      },
      references: {
        'export requests (joined windows)': joined.exportRequests,
        'export requests (100k-block chunks)': chunks.exportRequests,
      },
      targets: [
        target('verify / export requests (joined)', joined.requests / joined.exportRequests, '<=', 0.1, '×', ctx.quick),
        target('verify / export requests (100k-block chunks)', chunks.requests / chunks.exportRequests, '<=', 0.1, '×', ctx.quick),
      ],
      notes: ['Requests as sent (every attempt), the export’s head pin included; verify sends count requests only (one-entry pages).'],
    };
  } finally {
    await sim.close();
  }
}
