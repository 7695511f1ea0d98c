import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { runCli } from '../helpers/cli.js';
import { tempDir } from '../helpers/lake.js';

/** The CLI's side of issue 20 against the simulator's real dialect, run as a user would (the built dist/). */
let sim: RunningSimulator;
let dir: string;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  sim = await startSimulator({ seed: 5, dialect: 'real' });
  ({ dir, cleanup } = await tempDir());
});

afterAll(async () => {
  await sim?.close();
  await cleanup?.();
});

describe('chainlake and the real services', () => {
  it('describe --endpoints lists every endpoint id with its default path', async () => {
    const r = await runCli(['describe', '--endpoints']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^total_chart\s+stable_chart\s+finance\s+GET \/stablecoin\/total_chart$/m);
    expect(r.stdout).toMatch(/^event_logs\s+event_logs\s+explorer\s+GET \/v1\/event-logs$/m);
    expect(r.stdout).toMatch(/^contract_verify\s+\(verify-contract\)\s+explorer\s+POST \/v1\/contracts\/\{address\}\/verify$/m);
    expect(r.stdout.trim().split('\n').length).toBe(33);
  });

  it('a finance-only export needs no explorer URL', async () => {
    const lake = path.join(dir, 'finance');
    const r = await runCli(['export', 'dashboard', '--lake', lake, '--log-format', 'json'], { env: { CHAINLAKE_FINANCE_URL: sim.urls.finance } });
    expect(r.stderr).not.toMatch(/no mainnet base URL/);
    expect(r.code).toBe(0);
  });

  it('export --head takes the head as given: no blocks/latest, no search', async () => {
    const lake = path.join(dir, 'head');
    const head = sim.head() - 10;
    sim.resetStats();
    const r = await runCli(
      ['export', 'erc20_transfers', '--address', sim.examples.addresses[0]!, '--head', String(head), '--lake', lake, '--report', path.join(dir, 'head.json')],
      { env: { CHAINLAKE_MAINNET_URL: sim.urls.mainnet, CHAINLAKE_API_KEY: sim.apiKey } },
    );
    expect(r.code).toBe(0);
    const report = JSON.parse(await readFile(path.join(dir, 'head.json'), 'utf8')) as { head: number; outsideWindows: { requests: number } };
    expect(report.head).toBe(head);
    expect(report.outsideWindows.requests).toBe(0);
    expect(sim.stats().byRoute['mainnet/blocks'] ?? 0).toBe(0);
  });
});
