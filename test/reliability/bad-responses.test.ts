import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exitCodeOf } from '../../src/cli/common.js';
import { parseJob } from '../../src/pipeline/job.js';
import { runJob, type RunOptions } from '../../src/pipeline/run.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { runCli } from '../helpers/cli.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';
import { fingerprint, type LakePrint } from './fingerprint.js';
import { writeJobFile } from './helpers.js';
import { startProxy, type Proxy, type Rewrite } from './proxy.js';

/**
 * Bad responses from the API — wrong types, extra and missing fields, HTML bodies, a failure envelope in an
 * HTTP 200, an empty 200, a success envelope without results — each end as the design says: bad values are
 * rejects and the rest loads; a response that is not data fails its window (at once when the API says so,
 * after retries when it may be transient) with a message naming it, the exit code says so (1; 3 under
 * --strict), nothing of a failed window is committed, nothing committed before is lost, and a re-run once
 * the API is healthy completes the lake exactly.
 */
let sim: RunningSimulator;
let proxy: Proxy;
let dir: string;
let cleanup: () => Promise<void>;
let clean: LakePrint;
const A = '0x36b8f7473cdaa8441b4aa383dd6757c5603d8b8c';
const B = '0x235cc9e6a7b9bac03056f3eb7034c30bd80a5157';
type Json = Record<string, unknown>;

const job = (lake: string, strict = false) =>
  parseJob(
    {
      name: 'responses',
      target: 'simulator',
      lake,
      strict,
      range: { fromBlock: 0, toBlock: 30_000 },
      datasets: {
        transactions: { addresses: [A, B] },
        erc20_transfers: { addresses: [A] },
        pool_info: { pools: ['0x99959c7c941ae1ad906e192dda6a96d5b06a5017'] },
      },
    },
    'responses-test',
    process.env,
  );
// Short retries: a response that stays bad fails its window in well under a second.
const opts = (): RunOptions => ({
  simulator: { urls: proxy.urls, apiKey: sim.apiKey },
  transport: { retry: { maxAttempts: 3, baseDelayMs: 20, maxDelayMs: 50 } },
});
const isTxList = (u: URL, address = A) => u.pathname.endsWith(`/accounts/${address}/transactions`);

beforeAll(async () => {
  sim = await startSimulator({ seed: 1, scale: 'small' });
  proxy = await startProxy(sim);
  ({ dir, cleanup } = await tempDir('chainlake-responses-'));
  const r = await runJob(job(path.join(dir, 'clean')), opts());
  expect(r.status).toBe('complete');
  clean = await fingerprint(path.join(dir, 'clean'));
}, 120_000);
afterAll(async () => {
  await proxy?.close();
  await sim?.close();
  await cleanup?.();
});

async function runWith(name: string, rewrite: Rewrite, strict = false) {
  const lake = path.join(dir, name);
  proxy.setRewrite(rewrite);
  try {
    return { lake, report: await runJob(job(lake, strict), opts()) };
  } finally {
    proxy.setRewrite(undefined);
  }
}

/** The window of A's transactions failed (and only it); a healthy re-run completes the lake exactly. */
async function failedThenHealed(name: string, rewrite: Rewrite, message: RegExp): Promise<void> {
  const { lake, report } = await runWith(name, rewrite);
  expect(report.status).toBe('partial');
  expect(exitCodeOf(report, false)).toBe(1);
  expect(report.errors).toHaveLength(1);
  expect(report.errors[0]!.window).toContain(`transactions/mainnet/address=${A}`);
  expect(report.errors[0]!.error).toMatch(message);
  // Nothing of the failed window: A's transactions that B's window did not bring are absent.
  const [n] = await queryCatalog(
    lake,
    `SELECT count(*)::INT AS n FROM transactions WHERE (sender = '${A}' OR receiver = '${A}') AND sender <> '${B}' AND coalesce(receiver, '') <> '${B}'`,
  );
  expect(n!.n).toBe(0);
  const [w] = await queryCatalog(lake, `SELECT status, error FROM windows WHERE status = 'failed'`);
  expect(w!.error).toMatch(message);
  const healed = await runJob(job(lake), opts());
  expect(healed.status).toBe('complete');
  expect(healed.totals.windows).toBe(1); // resumed: only the failed window again
  expect(await fingerprint(lake)).toEqual(clean);
}

describe('bad responses', () => {
  it('wrong types, extra and missing fields: bad values are rejects, unknown fields reported, missing ones NULL; the rest loads', async () => {
    const { lake, report } = await runWith('types', (url, status, body) => {
      if (status !== 200 || !isTxList(url) || url.searchParams.get('offset') !== '0') return undefined;
      const b = JSON.parse(body) as { results: { data: Json[] } };
      const d = b.results.data;
      d[0]!.block_number = 'twelve';
      d[1]!.value = -5;
      d[2]!.timestamp = 1.5;
      d[3]!.surprise = { nested: true };
      delete d[4]!.gas_price;
      d[5]!.tx_status = 'maybe';
      return { body: JSON.stringify(b) };
    });
    expect(report.status).toBe('complete');
    expect(exitCodeOf(report, false)).toBe(0);
    expect(report.totals.rejects).toBe(4);
    expect(report.unknownFields).toEqual({ transactions: ['surprise'] });
    const rejects = await queryCatalog(lake, `SELECT field, raw_value FROM _rejects ORDER BY field`);
    expect(rejects.map((r) => r.field)).toEqual(['block_number', 'timestamp', 'tx_status', 'value']);
    const print = await fingerprint(lake);
    expect(print.transactions!.rows).toBe(clean.transactions!.rows - 4);
    expect(print.erc20_transfers).toEqual(clean.erc20_transfers);
    expect(print.pool_info).toEqual(clean.pool_info);
    const [nulls] = await queryCatalog(lake, `SELECT count(*)::INT AS n FROM transactions WHERE gas_price IS NULL`);
    expect(nulls!.n).toBe(1);
  });

  it('--strict: the windows with bad values fail whole (exit 3), the others load', async () => {
    const { lake, report } = await runWith(
      'strict',
      (url, status, body) => {
        if (status !== 200 || !isTxList(url) || url.searchParams.get('offset') !== '0') return undefined;
        const b = JSON.parse(body) as { results: { data: Json[] } };
        b.results.data[0]!.value = 'lots';
        return { body: JSON.stringify(b) };
      },
      true,
    );
    expect(exitCodeOf(report, true)).toBe(3);
    expect(report.errors.map((e) => e.error)).toEqual([expect.stringMatching(/1 rows did not convert \(strict mode\)/)]);
    // The exit code follows the failure's code, kept from the window's error, not words of its message.
    expect(report.errors.map((e) => e.code)).toEqual(['CHAINLAKE_STRICT_REJECTS']);
    const reworded = { ...report, errors: report.errors.map((e) => ({ ...e, error: 'rows did not convert' })) };
    expect(exitCodeOf(reworded, true)).toBe(3);
    const notStrict = { ...report, errors: [{ window: 'w', error: 'HTTP 503 (strict mode)', code: 'CHAINLAKE_API_ERROR' as const }] };
    expect(exitCodeOf(notStrict, true)).toBe(1);
    const print = await fingerprint(lake);
    expect(print.erc20_transfers).toEqual(clean.erc20_transfers);
    expect(print.transactions!.rows).toBeLessThan(clean.transactions!.rows);
  });

  it('an HTML body in an HTTP 200 (every time): retried, then the window fails naming it', () =>
    failedThenHealed(
      'html',
      (url) => (isTxList(url) ? { body: '<html><body><h1>502 Bad Gateway</h1></body></html>', contentType: 'text/html' } : undefined),
      /not JSON|HTML|bad body|text\/html/i,
    ));

  it('an empty HTTP 200: retried, then the window fails naming it', () =>
    failedThenHealed('empty', (url) => (isTxList(url) ? { body: '' } : undefined), /empty|not JSON|bad body/i));

  it('a failure envelope in an HTTP 200: the window fails at once with the API message', async () => {
    const before = proxy.seen.get(`/mainnet/v1/accounts/${A}/transactions`) ?? 0;
    await failedThenHealed(
      'envelope',
      (url) => (isTxList(url) ? { body: JSON.stringify({ status: '400', message: 'Error! Invalid address format', results: null }) } : undefined),
      /Invalid address format/,
    );
    // Terminal: one attempt in the failing run, one in the healed run.
    expect((proxy.seen.get(`/mainnet/v1/accounts/${A}/transactions`) ?? 0) - before).toBeLessThanOrEqual(3);
  });

  it('a success envelope without results: the window fails, never an empty page', () =>
    failedThenHealed('no-results', (url) => (isTxList(url) ? { body: JSON.stringify({ status: '200', message: 'OK' }) } : undefined), /results/));

  it('a finance failure envelope in an HTTP 200 fails the finance window, the chain data loads', async () => {
    const { lake, report } = await runWith('finance', (url) =>
      url.pathname.startsWith('/finance') ? { body: JSON.stringify({ type: 'error', message: 'maintenance window', data: null }) } : undefined,
    );
    expect(report.status).toBe('partial');
    expect(report.errors.map((e) => e.window)).toEqual([expect.stringContaining('pool_info')]);
    expect(report.errors[0]!.error).toMatch(/maintenance window/);
    const print = await fingerprint(lake);
    expect(print.transactions).toEqual(clean.transactions);
    expect(print.pool_info).toBeUndefined();
  });

  it('end to end through the CLI: a failure envelope exits 1, prints the failed window and its message', async () => {
    proxy.setRewrite((url) => (isTxList(url, B) ? { body: JSON.stringify({ status: '0', message: 'NOTOK: query timeout', results: null }) } : undefined));
    try {
      const file = await writeJobFile(path.join(dir, 'cli.json'), {
        name: 'responses-cli',
        target: 'api',
        endpoints: { mainnet: proxy.urls.mainnet },
        lake: path.join(dir, 'cli'),
        range: { toBlock: 30_000 },
        datasets: { transactions: { addresses: [A, B] } },
      });
      const r = await runCli(['run', file], { env: { CHAINLAKE_API_KEY: sim.apiKey } });
      expect(r.code, r.stderr).toBe(1);
      expect(r.stdout + r.stderr).toMatch(new RegExp(`transactions/mainnet/address=${B}[\\s\\S]*NOTOK: query timeout`));
    } finally {
      proxy.setRewrite(undefined);
    }
  });
});
