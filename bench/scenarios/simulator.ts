import { benchSimulator } from '../../src/simulator/bench.js';
import { target, type Context, type ScenarioResult } from '../lib/result.js';
import { startSimProcess } from '../lib/simproc.js';

/** 7. The simulator itself: rows served per second, 1000-row pages over loopback, server in its own process. */
export async function simulator(ctx: Context): Promise<Omit<ScenarioResult, 'seconds'>> {
  const sim = await startSimProcess({ scale: ctx.quick ? 'small' : 'large' });
  try {
    const remote = { mainnet: sim.info.mainnet, apiKey: sim.info.apiKey, whale: sim.info.examples.whale };
    const seconds = ctx.quick ? 1 : 10;
    // The client counts rows without parsing, so the figure is the server's and not the client's JSON.parse.
    const raw = await benchSimulator({ remote, seconds, concurrency: 4, parse: false });
    const parsed = await benchSimulator({ remote, seconds: ctx.quick ? 1 : 5, concurrency: 4, parse: true });
    return {
      scenario: 'simulator',
      title: 'simulator: rows served per second (1000-row pages, loopback, 4 connections)',
      measured: { 'rows/s served': raw.rowsPerSecond, requests: raw.requests },
      references: { 'rows/s with a client that JSON.parses every page': parsed.rowsPerSecond },
      targets: [target('rows served/s', raw.rowsPerSecond, '>=', 200_000, 'rows/s', ctx.quick)],
      notes: [],
    };
  } finally {
    await sim.stop();
  }
}
