import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { CLI, runCli, runCliCapturing, runCliInProcess, type CliResult } from '../helpers/cli.js';
import { tempDir } from '../helpers/lake.js';

let sim: RunningSimulator;
let dir: string;
let cleanup: () => Promise<void>;
const CANARY_KEY = 'canary-key-7f3a9d1c';

beforeAll(async () => {
  sim = await startSimulator({ seed: 3, apiKey: CANARY_KEY });
  ({ dir, cleanup } = await tempDir());
});
afterAll(async () => {
  await sim?.close();
  await cleanup?.();
});

/**
 * A command in this process, as the bin runs it (test/helpers/cli.ts runCliCapturing): what it prints, every byte
 * the command writes and the exit code it decides, with `env` over this process's environment for the call (no API
 * key or URL unless given, as runCli's children). What these tests are about is the command's output and exit
 * code, not its process; the bin's own exit code (a bad job file) and a signal (simulate) keep their child.
 */
const inProcess = (args: string[], opts: { env?: NodeJS.ProcessEnv } = {}): Promise<CliResult> =>
  runCliCapturing(args, { CHAINLAKE_API_KEY: '', CHAINLAKE_MAINNET_URL: '', ...opts.env });

describe('chainlake CLI', () => {
  it('prints its version and help with examples for every command', async () => {
    const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { version: string };
    const v = await runCliInProcess(['--version']);
    expect(v.code).toBe(0);
    expect(v.stdout.trim()).toMatch(new RegExp(`^${pkg.version.replace(/\./g, '\\.')} \\(duckdb v`));
    for (const cmd of ['run', 'export', 'query', 'describe', 'simulate']) {
      const h = await runCliInProcess([cmd, '--help']);
      expect(h.code, cmd).toBe(0);
      expect(h.stdout, cmd).toMatch(/Examples:/);
    }
  });

  it('exits 2 with a clear message on a bad command, flag or job file', async () => {
    const bad = await runCliInProcess(['frobnicate']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('unknown command "frobnicate"');

    const job = path.join(dir, 'bad.json');
    await writeFile(job, JSON.stringify({ target: 'simulator', datasets: { transactions: { addresses: ['0x12'] } } }));
    const r = await runCli(['run', job]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(job);
    expect(r.stderr).toContain('datasets.transactions.addresses[0]');

    await writeFile(job, '{ "datasets": ');
    // The built CLI's exit 2 for a bad job file is above; the other refusals in this process.
    expect((await runCliInProcess(['run', job])).stderr).toMatch(/not valid JSON/);

    const neg = await runCliInProcess(['export', 'transactions', '--simulator', '--address', sim.examples.addresses[0]!, '--from-block', '-5']);
    expect(neg.code).toBe(2);
    expect(neg.stderr).toMatch(/--from-block must be a block number \(a non-negative integer\), got -5/);
  });

  it('exports ad hoc from API URLs in the environment and queries the lake in every format', async () => {
    const lake = path.join(dir, 'lake-env');
    const address = sim.examples.addresses[1]!;
    const env = { CHAINLAKE_MAINNET_URL: sim.urls.mainnet, CHAINLAKE_API_KEY: CANARY_KEY };
    const r = await inProcess(
      ['export', 'transactions', '--address', address, '--from-block', '100', '--to-block', '20000', '--lake', lake, '--report', path.join(dir, 'report.json')],
      { env },
    );
    expect(r.stderr).not.toContain(CANARY_KEY);
    expect(r.stdout).not.toContain(CANARY_KEY);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/transactions\s+1\s+0\s+\d+/);
    const report = JSON.parse(readFileSync(path.join(dir, 'report.json'), 'utf8')) as { status: string; totals: { rows: number } };
    expect(report.status).toBe('complete');
    expect(JSON.stringify(report)).not.toContain(CANARY_KEY);

    const sql = 'SELECT count(*) AS n, min(block_number) AS lo, max(block_number) AS hi FROM transactions';
    const json = await inProcess(['query', '--lake', lake, '--format', 'json', sql]);
    expect(json.code).toBe(0);
    const row = JSON.parse(json.stdout.trim()) as { n: string | number; lo: string | number; hi: string | number };
    expect(Number(row.n)).toBe(report.totals.rows);
    expect(Number(row.lo)).toBeGreaterThanOrEqual(100);
    expect(Number(row.hi)).toBeLessThanOrEqual(20000);

    const csv = await inProcess(['query', '--lake', lake, '--format', 'csv', sql]);
    expect(csv.stdout.trim().split('\n')).toEqual(['n,lo,hi', `${row.n},${row.lo},${row.hi}`]);
    const table = await inProcess(['query', '--lake', lake, sql]);
    expect(table.stdout).toMatch(/\(1 row\)/);

    const types = await inProcess([
      'query',
      '--lake',
      lake,
      '--format',
      'csv',
      "SELECT column_name, column_type FROM (DESCRIBE transactions) WHERE column_name IN ('block_number','timestamp','value','tx_status')",
    ]);
    expect(types.stdout).toContain('block_number,BIGINT');
    expect(types.stdout).toContain('timestamp,TIMESTAMP WITH TIME ZONE');
    expect(types.stdout).toContain('value,"DECIMAL(38,0)"'); // CSV quotes the comma
    expect(types.stdout).toContain('tx_status,BOOLEAN');
  });

  it('a wrong API key fails fast with exit 2, naming the problem and CHAINLAKE_API_KEY but never the key', async () => {
    const lake = path.join(dir, 'lake-badkey');
    const wrong = 'wrong-key-0000';
    const r = await inProcess(['export', 'transactions', '--address', sim.examples.addresses[0]!, '--lake', lake], {
      env: { CHAINLAKE_MAINNET_URL: sim.urls.mainnet, CHAINLAKE_API_KEY: wrong },
    });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/HTTP 40[13][\s\S]*CHAINLAKE_API_KEY/);
    expect(r.stderr + r.stdout).not.toContain(wrong);
  });

  it('without a URL it says which variable to set', async () => {
    const r = await inProcess(['export', 'transactions', '--address', sim.examples.addresses[0]!, '--lake', path.join(dir, 'x')]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/CHAINLAKE_MAINNET_URL/);
  });

  it('query on a missing lake explains itself', async () => {
    const r = await inProcess(['query', '--lake', path.join(dir, 'nowhere'), 'SELECT 1']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/no lake at/);
  });

  it('a second run on a locked lake exits 75 at once', async () => {
    const lake = path.join(dir, 'lake-locked');
    const { mkdir } = await import('node:fs/promises');
    await mkdir(lake, { recursive: true });
    // The test process itself is alive on this host, so its lock is not stale.
    await writeFile(
      path.join(lake, '.chainlake.lock'),
      JSON.stringify({ pid: process.pid, host: os.hostname(), runId: 'holder', startedAt: new Date().toISOString() }),
    );
    const r = await inProcess(['export', 'transactions', '--simulator', '--address', sim.examples.addresses[0]!, '--lake', lake]);
    expect(r.code).toBe(75);
    expect(r.stderr).toMatch(/locked by run holder/);
  });

  it('verify-contract submits the source base64-encoded; exit 0 when verified, 1 when refused', async () => {
    const env = { CHAINLAKE_MAINNET_URL: sim.urls.mainnet, CHAINLAKE_API_KEY: CANARY_KEY };
    const contract = sim.examples.unverifiedContract;
    const src = path.join(dir, 'Vault.sol');
    await writeFile(src, '// SPDX-License-Identifier: MIT\npragma solidity ^0.8.24;\ncontract Vault { uint256 public total; }\n');
    const refused = await inProcess(['verify-contract', contract, '--source', src, '--name', 'NotInTheSource', '--compiler', 'v0.8.24'], { env });
    expect(refused.code).toBe(1);
    expect(refused.stdout).toMatch(/not verified/);
    const ok = await inProcess(['verify-contract', contract, '--source', src, '--name', 'Vault', '--compiler', 'v0.8.24', '--runs', '500'], { env });
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toMatch(/^verified: 0x[0-9a-f]{40} \(Vault\)/);
    // The explorer now serves the code record with our source, base64.
    const { request } = await import('undici');
    const res = await request(`${sim.urls.mainnet}/v1/contracts/${contract}/code`, { headers: { 'api-key': CANARY_KEY } });
    const body = (await res.body.json()) as { results: { data: { contract_source: string; runs_optimizer: string } } };
    expect(Buffer.from(body.results.data.contract_source, 'base64').toString('utf8')).toContain('contract Vault');
    expect(body.results.data.runs_optimizer).toBe('500');
    const bad = await inProcess(['verify-contract', '0x12', '--source', src, '--name', 'Vault', '--compiler', 'v1'], { env });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/verify-contract <address>: not an address/);
  });

  it('exits 3 under --strict when rows do not convert, and keeps them in _rejects without it', async () => {
    // A loopback proxy spoils one value per page; our stages run unchanged.
    const http = await import('node:http');
    const { request } = await import('undici');
    const proxy = http.createServer((req, res) => {
      void (async () => {
        const up = await request(new URL(sim.urls.mainnet).origin + req.url, { headers: { 'api-key': String(req.headers['api-key'] ?? '') } });
        const body = (await up.body.json()) as { results?: { data?: Record<string, unknown>[] } };
        const first = body.results?.data?.[0];
        if (first && 'value' in first) first.value = '12abc';
        res.writeHead(up.statusCode, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
      })();
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    const port = (proxy.address() as { port: number }).port;
    const env = { CHAINLAKE_MAINNET_URL: `http://127.0.0.1:${port}/mainnet`, CHAINLAKE_API_KEY: CANARY_KEY };
    try {
      const args = ['export', 'transactions', '--address', sim.examples.addresses[2]!, '--to-block', '20000'];
      const strict = await inProcess([...args, '--lake', path.join(dir, 'lake-strict'), '--strict'], { env });
      expect(strict.code, strict.stderr).toBe(3);
      expect(strict.stdout).toMatch(/strict mode/);
      const lenient = await inProcess(
        [...args, '--lake', path.join(dir, 'lake-lenient'), '--format', 'json'].filter((a) => a !== '--format' && a !== 'json'),
        { env },
      );
      expect(lenient.code, lenient.stderr).toBe(0);
      const rejects = await inProcess(['query', '--lake', path.join(dir, 'lake-lenient'), '--format', 'csv', 'SELECT field, raw_value, reason FROM _rejects']);
      expect(rejects.stdout).toMatch(/value,12abc,not a non-negative integer amount/);
    } finally {
      proxy.close();
    }
  });

  it('simulate prints one JSON line with its URLs and key, then stops cleanly on SIGTERM', async () => {
    const child = spawn(process.execPath, [CLI, 'simulate', '--port', '0', '--seed', '5'], { stdio: ['ignore', 'pipe', 'pipe'] });
    const line = await new Promise<string>((resolve, reject) => {
      let buf = '';
      const t = setTimeout(() => reject(new Error('simulate printed nothing in 45 s')), 45_000);
      child.stdout.on('data', (d: Buffer) => {
        buf += d.toString();
        const nl = buf.indexOf('\n');
        if (nl >= 0) {
          clearTimeout(t);
          resolve(buf.slice(0, nl));
        }
      });
    });
    const info = JSON.parse(line) as Record<string, unknown>;
    expect(Object.keys(info)).toEqual(expect.arrayContaining(['mainnet', 'testnet', 'testnetAlt', 'finance', 'apiKey', 'examples']));
    expect(info.mainnet).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mainnet$/);
    const code = await new Promise<number | null>((resolve) => {
      child.on('close', (c) => resolve(c));
      child.kill('SIGTERM');
    });
    expect(code).toBe(0);
  });
});
