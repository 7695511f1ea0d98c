import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Accounting } from '../../src/extract/accounting.js';
import { ApiError } from '../../src/extract/errors.js';
import { ExplorerClient } from '../../src/extract/explorer.js';
import { checkFinanceEnvelope, FinanceClient } from '../../src/extract/finance.js';
import { EnvelopeFailure, HttpTransport } from '../../src/extract/transport.js';
import { startSimulator, type RunningSimulator, type SimulatorExamples } from '../../src/simulator/index.js';

/** The typed client methods, one per endpoint of both specs, against the simulator over loopback. */
let sim: RunningSimulator;
let ex: SimulatorExamples;
let transport: HttpTransport;
let explorer: ExplorerClient;
let finance: FinanceClient;
const acct = new Accounting();

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

describe('explorer client: a typed method per endpoint', () => {
  it('#1 balances: 1 to 20 addresses, a clear error outside that range before any request', async () => {
    const before = acct.requests;
    await expect(explorer.balances([], acct)).rejects.toThrow(/1 to 20 addresses per call, got 0/);
    await expect(
      explorer.balances(
        Array.from({ length: 21 }, () => ex.whale),
        acct,
      ),
    ).rejects.toThrow(/got 21/);
    await expect(explorer.balances(['0x12'], acct)).rejects.toThrow(/addresses\[0\] must be an address/);
    expect(acct.requests).toBe(before);
    const data = await explorer.balances(ex.addresses, acct);
    expect(data.map((d) => String(d.address).toLowerCase())).toEqual(ex.addresses);
    for (const d of data) expect(d.balance).toMatch(/^\d+$/);
  });

  it('#2-#10 account listings', async () => {
    const a = ex.addresses[0]!;
    const lists = [
      await explorer.transactions(a, { limit: 5, condition: 'from', startBlock: 0 }, acct),
      await explorer.internalTransactions(ex.addresses[1]!, { limit: 5 }, acct),
      await explorer.erc20Transfers(a, { limit: 5 }, acct),
      await explorer.erc721Transfers(ex.nftHolder, { limit: 5 }, acct),
      await explorer.erc20Tokens(ex.nftHolder, { limit: 5 }, acct),
      await explorer.erc721Tokens(ex.nftHolder, { limit: 5 }, acct),
      await explorer.accountInventory(ex.nftHolder, undefined, { limit: 5 }, acct),
      await explorer.accountInventory(ex.nftHolder, ex.erc721Token, { limit: 5 }, acct),
      await explorer.minedBlocks(ex.miner, { limit: 5 }, acct),
    ];
    for (const l of lists) {
      expect(Number(l.count)).toBeGreaterThan(0);
      expect(l.data.length).toBeGreaterThan(0);
    }
    const groups = await explorer.tokens(ex.nftHolder, { limit: 5 }, acct);
    expect(Object.keys(groups).sort()).toEqual(['erc_20', 'erc_721']);
  });

  it('#11-#13 transactions; #13 has no offset', async () => {
    expect((await explorer.transactionStatus(ex.failedTransactionHash, acct)).data.status).toBe('0');
    expect((await explorer.receiptStatus(ex.transactionHash, acct)).data.status).toMatch(/^[01]$/);
    const itx = await explorer.transactionInternalTransactions(ex.internalTransactionHash, { limit: 1000 }, acct);
    expect(itx.data.length).toBe(Number(itx.count));
    await expect(explorer.transactionStatus('0x12', acct)).rejects.toThrow(/transaction hash/);
  });

  it('#14-#16 contracts: ABI, code record, and verification with the source sent as base64', async () => {
    expect((await explorer.contractAbi(ex.verifiedContract, acct)).length).toBeGreaterThan(0);
    expect((await explorer.contractCode(ex.verifiedContract, acct))['swarm source']).toMatch(/^bzzr:\/\//);
    const e = await explorer.contractCode(ex.unverifiedContract, acct).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ApiError);
    expect((e as ApiError).details.httpStatus).toBe(404);
    const req = {
      contractName: 'Thing',
      compiler: 'v0.8.24',
      runsOptimizer: 200,
      optimizationEnabled: true,
      source: 'pragma solidity ^0.8.0;\ncontract Thing {}\n',
    };
    expect(await explorer.verifyContract(ex.unverifiedContract, req, acct)).toBe(true);
    const code = await explorer.contractCode(ex.unverifiedContract, acct);
    expect(code.contract_name).toBe('Thing');
    expect(Buffer.from(code.contract_source as string, 'base64').toString('utf8')).toBe(req.source);
    expect(await explorer.verifyContract(ex.whale, { ...req, source: 'not a contract' }, acct)).toBe(false);
  });

  it('#17 blocks, #18 event logs, #19-#21 tokens', async () => {
    expect((await explorer.block(ex.block, acct)).block_number).toBe(String(ex.block));
    expect(Number((await explorer.block('latest', acct)).block_number)).toBe(sim.head());
    const logs = await explorer.eventLogs({ address: ex.erc20Token, topic0: ex.transferTopic, limit: 3, startBlock: 0, endBlock: sim.head() }, acct);
    expect(logs.data.length).toBe(3);
    expect(await explorer.tokenTotalSupply(ex.erc20Token, acct)).toMatch(/^\d+$/);
    expect(await explorer.tokenBalance(ex.erc20Token, ex.addresses[0]!, acct)).toMatch(/^\d+$/);
    const inv = await explorer.tokenInventory(ex.erc721Token, undefined, { limit: 2 }, acct);
    expect(typeof inv.token_name, 'token_name is a string, not null or missing').toBe('string');
    const holder = String(inv.data[0]!.holder_address);
    expect(Number((await explorer.tokenInventory(ex.erc721Token, holder, { limit: 2 }, acct)).count)).toBeGreaterThan(0);
  });

  it('#22-#25 the erc-721 group; #25 requires startBlock', async () => {
    expect(Number((await explorer.erc721Holdings(ex.nftHolder, { limit: 2 }, acct)).count)).toBeGreaterThan(0);
    expect(Number((await explorer.erc721Inventory(ex.erc721Token, { limit: 2 }, acct)).count)).toBeGreaterThan(0);
    expect(Number((await explorer.erc721Contracts(ex.nftHolder, { limit: 2 }, acct)).count)).toBeGreaterThan(0);
    expect(Number((await explorer.erc721TokenTransfers(ex.nftHolder, { startBlock: 0, limit: 2 }, acct)).count)).toBeGreaterThan(0);
    await expect(explorer.erc721TokenTransfers(ex.nftHolder, { startBlock: undefined as unknown as number }, acct)).rejects.toThrow(/startBlock is required/);
  });

  it('testnet: #13 goes to the alternate host; without one configured, a clear error', async () => {
    const t = new ExplorerClient(transport, { baseUrl: sim.urls.testnet, altBaseUrl: sim.urls.testnetAlt, apiKey: sim.apiKey, network: 'testnet' });
    const tx = sim.testnetExamples.internalTransactionHash;
    const r = await t.transactionInternalTransactions(tx, { limit: 1000 }, acct);
    expect(r.data.length).toBeGreaterThan(0);
    const noAlt = new ExplorerClient(transport, { baseUrl: sim.urls.testnet, apiKey: sim.apiKey, network: 'testnet' });
    await expect(noAlt.transactionInternalTransactions(tx, {}, acct)).rejects.toThrow(/alternate base URL/);
  });
});

describe('finance client: the five endpoints, no api-key, its own envelope', () => {
  it('reads every endpoint', async () => {
    expect((await finance.stableChart({ unit: 'hour', unitCount: 3, unitMultiplier: 2 }, acct)).length).toBe(3);
    expect((await finance.stakingInfo(1, acct))[0]!.pid).toBe('1');
    expect(Object.keys(await finance.stakingRewards(undefined, acct)).sort()).toEqual(['_staking_reward', 'staking_reward']);
    expect((await finance.dashboard(acct)).tvl).toEqual(expect.any(Number));
    expect((await finance.poolInfo(ex.pools[0]!, acct))[0]!.pool_address).toMatch(/^0x/i);
    await expect(finance.stableChart({ unit: 'week' as 'day', unitCount: 1, unitMultiplier: 1 }, acct)).rejects.toThrow(/unit must be minute, hour or day/);
    const e = await finance.poolInfo(ex.whale, acct).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ApiError);
    expect((e as ApiError).kind).toBe('terminal');
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
