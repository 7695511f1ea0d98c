import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Accounting } from '../../src/extract/accounting.js';
import { ApiError } from '../../src/extract/errors.js';
import { ExplorerClient } from '../../src/extract/explorer.js';
import { checkFinanceEnvelope, FinanceClient } from '../../src/extract/finance.js';
import { EnvelopeFailure, HttpTransport } from '../../src/extract/transport.js';
import { DATASETS } from '../../src/datasets/registry.js';
import { fillPath } from '../../src/extract/endpoint.js';
import { startSimulator, type RunningSimulator, type SimulatorExamples } from '../../src/simulator/index.js';

/**
 * The two API clients against the simulator over loopback: generic calls (every endpoint of both specs is
 * exercised through its dataset declaration in declarations.test.ts), the one write, hosts and envelopes.
 */
let sim: RunningSimulator;
let ex: SimulatorExamples;
let transport: HttpTransport;
let explorer: ExplorerClient;
let finance: FinanceClient;
const acct = new Accounting();

/** An endpoint's path as its dataset declares it (the one place paths are written), filled from `scope`. */
function pathOf(id: string, scope: Record<string, string> = {}): string {
  const e = Object.values(DATASETS)
    .flatMap((d) => d.endpoints)
    .find((x) => x.id === id);
  if (!e) throw new Error(`no endpoint ${id}`);
  return fillPath(e.path, scope);
}

beforeAll(async () => {
  sim = await startSimulator({ seed: 13 });
  ex = sim.examples;
  transport = new HttpTransport({ concurrency: 4, retry: { maxAttempts: 2, baseDelayMs: 10 } });
  explorer = new ExplorerClient(transport, { baseUrl: sim.urls.mainnet, apiKey: sim.apiKey, network: 'mainnet' });
  finance = new FinanceClient(transport, { baseUrl: sim.urls.finance });
});

afterAll(async () => {
  await transport?.close();
  await sim?.close();
});

describe('explorer client: generic calls (the dataset declarations drive them) and the one write', () => {
  it("get returns the envelope's results; a refusal is an ApiError with the HTTP status", async () => {
    const block = (await explorer.get('explorer #17', pathOf('block', { block: String(ex.block) }), {}, acct)) as { data: { block_number: string } };
    expect(block.data.block_number).toBe(String(ex.block));
    const e = await explorer.get('explorer #15', pathOf('contract_code', { contract: ex.unverifiedContract }), {}, acct).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ApiError);
    expect((e as ApiError).details.httpStatus).toBe(404);
  });

  it('#16 verification sends the source as base64; true when verified, false when refused; arguments checked before any request', async () => {
    const req = {
      contractName: 'Thing',
      compiler: 'v0.8.24',
      runsOptimizer: 200,
      optimizationEnabled: true,
      source: 'pragma solidity ^0.8.0;\ncontract Thing {}\n',
    };
    const before = acct.requests;
    await expect(explorer.verifyContract('0x12', req, acct)).rejects.toThrow(/must be an address/);
    await expect(explorer.verifyContract(ex.unverifiedContract, { ...req, source: '' }, acct)).rejects.toThrow(/source must be non-empty/);
    expect(acct.requests).toBe(before);
    expect(await explorer.verifyContract(ex.unverifiedContract, req, acct)).toBe(true);
    const code = (await explorer.get('explorer #15', pathOf('contract_code', { contract: ex.unverifiedContract }), {}, acct)) as {
      data: Record<string, string>;
    };
    expect(code.data.contract_name).toBe('Thing');
    expect(Buffer.from(code.data.contract_source!, 'base64').toString('utf8')).toBe(req.source);
    expect(await explorer.verifyContract(ex.whale, { ...req, source: 'not a contract' }, acct)).toBe(false);
  });

  it('testnet: a call for the alternate host goes there; without one configured, a clear error', async () => {
    const t = new ExplorerClient(transport, { baseUrl: sim.urls.testnet, altBaseUrl: sim.urls.testnetAlt, apiKey: sim.apiKey, network: 'testnet' });
    const tx = sim.testnetExamples.internalTransactionHash;
    const path = pathOf('transaction_internal_transactions', { transaction: tx });
    const r = (await t.get('explorer #13', path, { limit: 1000 }, acct, 'alt')) as { data: unknown[] };
    expect(r.data.length).toBeGreaterThan(0);
    const noAlt = new ExplorerClient(transport, { baseUrl: sim.urls.testnet, apiKey: sim.apiKey, network: 'testnet' });
    await expect(noAlt.get('explorer #13', path, {}, acct, 'alt')).rejects.toThrow(/alternate base URL/);
  });
});

describe('finance client: no api-key, its own envelope', () => {
  it('get returns the whole success envelope; an unknown pool is a terminal ApiError; there is no POST', async () => {
    const env = (await finance.get('finance dashboard', pathOf('dashboard_overview'), {}, acct)) as { type: string; data: { tvl: unknown } };
    expect(env.type.toLowerCase()).toBe('success');
    expect(env.data.tvl).toEqual(expect.any(Number));
    const e = await finance.get('finance pool', pathOf('pool_info_list'), { pool: ex.whale }, acct).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ApiError);
    expect((e as ApiError).kind).toBe('terminal');
    await expect(finance.post('finance x')).rejects.toThrow(/no POST endpoint/);
  });

  it('success is type "success"; a throttle is transient; anything else a terminal failure', () => {
    expect(checkFinanceEnvelope({ type: 'success', message: 'Success', data: [] })).toEqual({ type: 'success', message: 'Success', data: [] });
    const fail = (body: unknown): EnvelopeFailure => {
      try {
        checkFinanceEnvelope(body);
      } catch (e) {
        return e as EnvelopeFailure;
      }
      throw new Error('expected a failure');
    };
    expect(fail({ type: 'failure', message: 'Too many requests', data: null })).toMatchObject({ kind: 'transient', throttled: true });
    expect(fail({ type: 'failure', message: 'Service temporarily unavailable', data: null })).toMatchObject({ kind: 'transient', throttled: false });
    expect(fail({ type: 'failure', message: 'Unknown pool', data: null })).toMatchObject({ kind: 'terminal' });
    expect(fail({ type: 'success', message: 'Success' })).toMatchObject({ kind: 'terminal', apiMessage: 'success envelope without data' });
    expect(fail([1])).toMatchObject({ kind: 'transient' });
  });
});
