import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { CLI, onJsonLines, runCli } from '../helpers/cli.js';
import { tempDir } from '../helpers/lake.js';

// Issue 23: an API nothing answers at is a setup error a person must fix (exit 2, naming the address and the
// settings that hold it); an API that answers but fails stays "partial, the next run catches up" (exit 1); and
// Ctrl-C during a retry's wait stops the run at once instead of after the backoff.
const KEY = 'unreachable-test-key';
const ADDRESS = '0x36b8f7473cdaa8441b4aa383dd6757c5603d8b8c';
let dir: string;
let cleanup: () => Promise<void>;
let sim: RunningSimulator;
const servers: Server[] = [];

beforeAll(async () => {
  ({ dir, cleanup } = await tempDir());
  sim = await startSimulator({ seed: 3, apiKey: KEY });
});
afterAll(async () => {
  for (const s of servers) s.close();
  await sim?.close();
  await cleanup?.();
});

async function listen(handler: Parameters<typeof createServer>[1]): Promise<string> {
  const server = createServer(handler);
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** A loopback port nothing listens on: bound, then released. */
async function refusedUrl(): Promise<string> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  await new Promise((r) => server.close(r));
  return `http://127.0.0.1:${port}`;
}

async function writeJob(name: string, retry: Record<string, number>): Promise<{ file: string; lake: string }> {
  const lake = path.join(dir, name);
  const file = path.join(dir, `${name}.json`);
  await writeFile(file, JSON.stringify({ name, target: 'api', lake, retry, datasets: { transactions: { addresses: [ADDRESS] } } }));
  return { file, lake };
}

const FAST_RETRY = { maxAttempts: 2, baseDelayMs: 5, maxDelayMs: 10 };

describe('an API nothing answers at', () => {
  it('exits 2 when the head lookup reaches nothing, naming the address and CHAINLAKE_MAINNET_URL', async () => {
    const url = await refusedUrl();
    const { file } = await writeJob('refused-head', FAST_RETRY);
    const r = await runCli(['run', file, '-q'], { env: { CHAINLAKE_MAINNET_URL: url, CHAINLAKE_API_KEY: KEY } });
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toContain(`nothing answers at ${url}`);
    expect(r.stderr).toMatch(/hint: .*CHAINLAKE_MAINNET_URL/);
    expect(r.stderr).not.toContain(KEY);
  });

  it('exits 2 when every window reaches nothing (head given), and the report says so', async () => {
    const url = await refusedUrl();
    const { file } = await writeJob('refused-windows', FAST_RETRY);
    const report = path.join(dir, 'refused-windows.report.json');
    const r = await runCli(['run', file, '-q', '--head', '5000', '--report', report], { env: { CHAINLAKE_MAINNET_URL: url, CHAINLAKE_API_KEY: KEY } });
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/hint: .*CHAINLAKE_MAINNET_URL/);
    const { readFile } = await import('node:fs/promises');
    const rep = JSON.parse(await readFile(report, 'utf8')) as { status: string; unreachable?: string[] };
    expect(rep.status).toBe('failed');
    expect(rep.unreachable).toEqual([url]);
  });

  it('an API that answers but fails stays exit 1 (the next run catches up), without the unreachable hint', async () => {
    // The head comes from the simulator; every listing answers 503.
    const url = await listen((req, res) => {
      if (req.url?.startsWith('/v1/blocks/latest')) {
        void fetch(new URL(req.url, sim.urls.mainnet))
          .then(async (up) => {
            res.writeHead(up.status, { 'content-type': 'application/json' });
            res.end(await up.text());
          })
          .catch(() => res.destroy());
        return;
      }
      res.writeHead(503, { 'content-type': 'application/json' });
      res.end('{"status":"0","message":"busy","results":null}');
    });
    const { file } = await writeJob('answers-503', FAST_RETRY);
    const r = await runCli(['run', file, '-q'], { env: { CHAINLAKE_MAINNET_URL: url, CHAINLAKE_API_KEY: KEY } });
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).not.toContain('nothing answers');
  });
});

describe('Ctrl-C during a retry wait', () => {
  it('ends the run at once, not after the backoff: exit 130, logged as interrupted', async () => {
    // Every request answers 503 and the backoff is ten minutes: only an interrupted wait lets the run end.
    const url = await listen((_req, res) => {
      res.writeHead(503, { 'content-type': 'application/json' });
      res.end('{"status":"0","message":"busy","results":null}');
    });
    const { file } = await writeJob('ctrl-c', { maxAttempts: 5, baseDelayMs: 600_000, maxDelayMs: 600_000, maxTotalDelayMs: 3_600_000 });
    const child = spawn(process.execPath, [CLI, 'run', file, '--log-format', 'json', '--head', '5000'], {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, CHAINLAKE_MAINNET_URL: url, CHAINLAKE_API_KEY: KEY },
    });
    const events: Record<string, unknown>[] = [];
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    let retryDelayMs = 0;
    onJsonLines(child.stderr, (ev) => {
      events.push(ev);
      if (ev.event === 'request.retry' && retryDelayMs === 0) {
        retryDelayMs = Number(ev.delayMs);
        child.kill('SIGINT');
      }
    });
    // Far below the announced wait (at least a minute): a run that sits out its backoff fails here.
    const timer = setTimeout(() => child.kill('SIGKILL'), 45_000);
    const [code, signal] = (await once(child, 'close')) as [number | null, NodeJS.Signals | null];
    clearTimeout(timer);
    expect(retryDelayMs, stderr).toBeGreaterThanOrEqual(60_000);
    expect(signal, stderr).toBeNull();
    expect(code, stderr).toBe(130);
    expect(
      events.some((e) => e.event === 'run.interrupted'),
      stderr,
    ).toBe(true);
  }, 60_000);
});
