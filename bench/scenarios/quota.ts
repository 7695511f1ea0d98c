import path from 'node:path';
import { parseJob } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { startSimulator } from '../../src/simulator/index.js';
import { SparseChain } from '../../src/simulator/sparse.js';
import { target, type Context, type ScenarioResult } from '../lib/result.js';

/**
 * Quota: requests ÷ minimum for block-ranged listings from genesis on a chain of realistic height (the
 * simulator's sparse chain, head 53,450,000): a dense scope (tens of thousands of transfers, sparse early and
 * dense late) and a sparse one (a handful in 53M blocks). The minimum is ceil(rows / 1000) requests per scope,
 * one for an empty one. Request counts do not depend on the machine: the figures are exact. --quick starts the
 * dense scope at block 45M (a third of its rows) so that CI's smoke run can afford it.
 */
export async function quota(ctx: Context): Promise<Omit<ScenarioResult, 'seconds'>> {
  const seed = 1;
  const sim = await startSimulator({ seed, chain: 'sparse' });
  const tall = new SparseChain(seed, 'mainnet');
  try {
    const { dense, sparse } = sim.sparseAddresses!;
    const fromDense = ctx.quick ? 45_000_000 : 0;
    const measure = async (name: string, address: string, fromBlock: number, windowBlocks?: number) => {
      const range = windowBlocks === undefined ? { fromBlock } : { fromBlock, windowBlocks };
      const job = parseJob(
        { name: `quota-${name}`, target: 'simulator', lake: path.join(ctx.tmp, name), range, datasets: { erc20_transfers: { addresses: [address] } } },
        'bench quota',
        process.env,
      );
      const report = await runJob(job, { simulator: sim });
      if (report.status !== 'complete') throw new Error(`${name}: run ${report.status}: ${JSON.stringify(report.errors.slice(0, 3))}`);
      const rows = tall.count(address, fromBlock, tall.head);
      if (report.totals.rows !== rows) throw new Error(`${name}: ${report.totals.rows} rows in the lake, the chain holds ${rows}`);
      const requests = report.totals.requests - report.outsideWindows.requests;
      const minimum = Math.max(1, Math.ceil(rows / 1000));
      ctx.log(`${name}: ${rows} rows in blocks ${fromBlock}-${tall.head}: ${requests} requests, minimum ${minimum}`);
      return { rows, requests, minimum, windows: report.totals.windows };
    };
    const d = await measure('dense', dense, fromDense);
    const s = await measure('sparse', sparse, 0);
    // The same sparse scope in fixed 100,000-block chunks (what every run did before): one request per chunk.
    const fixed = ctx.quick ? undefined : await measure('sparse-fixed-chunks', sparse, 0, 100_000);
    const chunks = (from: number): number => Math.floor(tall.head / 100_000) - Math.floor(from / 100_000) + 1;
    return {
      scenario: 'quota',
      title: `requests on a ${tall.head.toLocaleString('en-US')}-block chain: a dense and a sparse scope from ${ctx.quick ? 'block 45M and genesis' : 'genesis'}`,
      measured: {
        'dense rows': d.rows,
        'dense requests': d.requests,
        'dense windows': d.windows,
        'sparse rows': s.rows,
        'sparse requests': s.requests,
      },
      references: {
        'dense minimum (ceil(rows/1000))': d.minimum,
        'sparse minimum': s.minimum,
        'fixed 100k-block chunks, dense (at least)': Math.max(chunks(fromDense), d.minimum),
        'fixed 100k-block chunks, sparse (at least)': chunks(0),
        ...(fixed ? { 'fixed 100k-block chunks, sparse (measured requests)': fixed.requests } : {}),
      },
      targets: [
        target('dense requests / minimum', d.requests / d.minimum, '<=', 1.05, '×', ctx.quick),
        target('sparse requests / minimum', s.requests / s.minimum, '<=', 1.05, '×', ctx.quick),
      ],
      notes: ['Requests counted by the run (every attempt), the head pin excluded; the simulator injects no faults here.'],
    };
  } finally {
    await sim.close();
  }
}
