import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getDataset } from '../../src/datasets/registry.js';
import { parseJob } from '../../src/pipeline/job.js';
import { formatReport, type RunReport } from '../../src/pipeline/report.js';
import { runJob } from '../../src/pipeline/run.js';
import { startSimulator, type RunningSimulator, type SimulatorExamples } from '../../src/simulator/index.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';
import { apiAll, apiResults, big, expectDeclaredTypes, lakeAmountSum, lower } from './helpers.js';

/** Snapshot datasets of the explorer: state as of the run, one partition per snapshot date. */
let sim: RunningSimulator;
let ex: SimulatorExamples;
let lake: string;
let cleanup: () => Promise<void>;
let report: RunReport;
let many: string[];
let maxToken: string;

beforeAll(async () => {
  sim = await startSimulator({ seed: 5 });
  ex = sim.examples;
  ({ dir: lake, cleanup } = await tempDir());
  // More than 20 addresses, so balances go out in several POST batches.
  const txs = (await apiResults(sim.urls.mainnet, sim.apiKey, `/v1/accounts/${ex.addresses[0]}/transactions`, { limit: 200 })).data as Record<
    string,
    unknown
  >[];
  many = [...new Set([...ex.addresses, ex.whale, ...txs.flatMap((t) => [lower(t.sender), t.receiver === null ? [] : lower(t.receiver)].flat())])].slice(0, 45);
  // The token whose single unit is 2^256-1 (its total supply does not fit DECIMAL(38,0)).
  for (const a of ex.addresses) {
    const huge = (await apiAll(sim.urls.mainnet, sim.apiKey, `/v1/accounts/${a}/token-transfer/erc20`)).find((e) => String(e.value).length > 38);
    if (huge) {
      maxToken = lower(huge.token_address);
      break;
    }
  }
  const job = parseJob(
    {
      name: 'snapshot',
      target: 'simulator',
      lake,
      concurrency: 4,
      datasets: {
        balances: { addresses: many },
        token_holdings: { addresses: [ex.addresses[1], ex.nftHolder] },
        nft_inventory: {
          addresses: [ex.addresses[1]],
          tokens: [ex.erc721Token],
          pairs: [{ token: ex.erc721Token, holder: ex.nftHolder }],
          endpoints: ['account_inventory', 'token_inventory', 'erc721_inventory', 'token_holder_inventory', 'account_token_inventory'],
        },
        token_supply: { tokens: [ex.erc20Token, ex.erc721Token, maxToken] },
        token_balances: { pairs: [ex.addresses[0], ex.addresses[1], ex.whale].map((holder) => ({ token: ex.erc20Token, holder })) },
        transaction_status: { transactions: [ex.transactionHash, ex.failedTransactionHash] },
        contracts: { contracts: [ex.verifiedContract, ex.unverifiedContract] },
      },
    },
    'snapshot-test',
    process.env,
  );
  report = await runJob(job, { simulator: sim, now: () => new Date('2025-06-01T12:00:00Z') });
}, 90_000);

afterAll(async () => {
  await sim?.close();
  await cleanup?.();
});

describe('explorer snapshot datasets round trip', () => {
  it('the run completes without rejects, into the snapshot_date of the run', async () => {
    expect(report.errors).toEqual([]);
    expect(report.status).toBe('complete');
    expect(report.totals.rejects).toBe(0);
    expect(report.unknownFields).toEqual({});
    const dates = await queryCatalog(lake, `SELECT DISTINCT snapshot_date::VARCHAR AS d FROM balances`);
    expect(dates).toEqual([{ d: '2025-06-01' }]);
  });

  it('balances: batches of at most 20 addresses, every balance exact', async () => {
    await expectDeclaredTypes(lake, getDataset('balances'));
    expect(many.length).toBeGreaterThan(40);
    const windows = await queryCatalog(lake, `SELECT count(*)::BIGINT AS n FROM windows WHERE dataset = 'balances'`);
    expect(Number(windows[0]!.n)).toBe(Math.ceil(many.length / 20));
    const rows = await queryCatalog(lake, `SELECT address, balance::VARCHAR AS balance, balance_raw FROM balances`);
    expect(rows.map((r) => r.address).sort()).toEqual([...many].sort());
    const res = await fetch(`${sim.urls.mainnet}/v1/accounts/balance`, {
      method: 'POST',
      headers: { 'api-key': sim.apiKey, 'content-type': 'application/json' },
      body: JSON.stringify({ addresses: many.slice(0, 20) }),
    });
    const api = ((await res.json()) as { results: { data: { address: string; balance: string }[] } }).results.data;
    for (const e of api) expect(rows.find((r) => r.address === lower(e.address))!.balance).toBe(e.balance);
  });

  it('token_holdings: each endpoint’s rows with their origin, balances exact', async () => {
    await expectDeclaredTypes(lake, getDataset('token_holdings'));
    for (const a of [ex.addresses[1], ex.nftHolder]) {
      const groups = await apiResults(sim.urls.mainnet, sim.apiKey, `/v1/accounts/${a}/tokens`, { limit: 1000 });
      const expected: Record<string, number> = {
        account_tokens_erc20: Number((groups.erc_20 as { count: string }).count),
        account_tokens_erc721: Number((groups.erc_721 as { count: string }).count),
        account_erc20_tokens: (await apiAll(sim.urls.mainnet, sim.apiKey, `/v1/accounts/${a}/tokens/erc20`)).length,
        account_erc721_tokens: (await apiAll(sim.urls.mainnet, sim.apiKey, `/v1/accounts/${a}/tokens/erc721`)).length,
        erc721_tokens: (await apiAll(sim.urls.mainnet, sim.apiKey, `/v1/erc-721/${a}/tokens`)).length,
        erc721_contracts: (await apiAll(sim.urls.mainnet, sim.apiKey, `/v1/erc-721/${a}/contracts`)).length,
      };
      const rows = await queryCatalog(lake, `SELECT origin_endpoint, count(*)::BIGINT AS n FROM token_holdings WHERE holder_address = '${a}' GROUP BY 1`);
      const got = Object.fromEntries(rows.map((r) => [r.origin_endpoint, Number(r.n)]));
      for (const [k, v] of Object.entries(expected)) expect(got[k] ?? 0, `${a} ${k}`).toBe(v);
      const erc20 = (groups.erc_20 as { results: { balance: string }[] }).results;
      expect(await lakeAmountSum(lake, 'token_holdings', 'balance', `holder_address = '${a}' AND origin_endpoint = 'account_tokens_erc20'`)).toBe(
        erc20.reduce((s, e) => s + big(e.balance), 0n),
      );
    }
    const [nft] = await queryCatalog(lake, `SELECT count(*)::BIGINT AS n FROM token_holdings WHERE origin_endpoint = 'erc721_tokens' AND token_id IS NULL`);
    expect(nft!.n).toBe(0n);
  });

  it('nft_inventory: one row per (token_address, token_id) with its owner, from every endpoint', async () => {
    await expectDeclaredTypes(lake, getDataset('nft_inventory'));
    const owners = new Map<string, string>();
    for (const e of await apiAll(sim.urls.mainnet, sim.apiKey, `/v1/tokens/${ex.erc721Token}/inventory`))
      owners.set(`${ex.erc721Token}/${e.token_id}`, lower(e.holder_address));
    for (const e of await apiAll(sim.urls.mainnet, sim.apiKey, `/v1/accounts/${ex.addresses[1]}/tokens/inventory`))
      owners.set(`${lower(e.contract_address)}/${e.token_id}`, ex.addresses[1]!);
    const rows = await queryCatalog(lake, `SELECT token_address || '/' || token_id AS k, holder_address, origin_endpoint FROM nft_inventory`);
    expect(rows.length).toBe(owners.size);
    for (const r of rows) expect(r.holder_address, r.k as string).toBe(owners.get(r.k as string));
    const origins = await queryCatalog(lake, `SELECT count(DISTINCT origin_endpoint)::BIGINT AS n FROM nft_inventory`);
    expect(Number(origins[0]!.n)).toBeGreaterThanOrEqual(2);
    const [meta] = await queryCatalog(
      lake,
      `SELECT count(*) FILTER (WHERE token_name IS NULL)::BIGINT AS n FROM nft_inventory WHERE token_address = '${ex.erc721Token}'`,
    );
    expect(meta!.n).toBe(0n);
  });

  it('token_supply: exact, 2^256-1 in total_supply_raw', async () => {
    await expectDeclaredTypes(lake, getDataset('token_supply'));
    expect(maxToken).toBeDefined();
    const rows = await queryCatalog(lake, `SELECT token_address, total_supply::VARCHAR AS s, total_supply_raw AS raw FROM token_supply ORDER BY token_address`);
    expect(rows.length).toBe(3);
    for (const r of rows) {
      const api = ((await apiResults(sim.urls.mainnet, sim.apiKey, `/v1/tokens/${r.token_address}/total-supply`)).data as { total_supply: string })
        .total_supply;
      expect(r.raw ?? r.s).toBe(api);
    }
    expect(rows.find((r) => r.token_address === maxToken)).toMatchObject({ s: null, raw: String(2n ** 256n - 1n) });
  });

  it('token_balances: one row per (token, holder), exact', async () => {
    await expectDeclaredTypes(lake, getDataset('token_balances'));
    const rows = await queryCatalog(lake, `SELECT holder_address, balance::VARCHAR AS b FROM token_balances WHERE token_address = '${ex.erc20Token}'`);
    expect(rows.length).toBe(3);
    for (const r of rows) {
      const api = ((await apiResults(sim.urls.mainnet, sim.apiKey, `/v1/tokens/${ex.erc20Token}/balance/${r.holder_address}`)).data as { balance: string })
        .balance;
      expect(r.b).toBe(api);
    }
  });

  it('transaction_status: execution status with description, and receipt status', async () => {
    await expectDeclaredTypes(lake, getDataset('transaction_status'));
    const rows = await queryCatalog(lake, `SELECT transaction_hash, status_kind, status, description FROM transaction_status ORDER BY 1, 2`);
    expect(rows.length).toBe(4);
    const failed = rows.filter((r) => r.transaction_hash === ex.failedTransactionHash);
    expect(failed.find((r) => r.status_kind === 'transaction_status')).toMatchObject({ status: false });
    expect(failed.find((r) => r.status_kind === 'transaction_status')!.description).toMatch(/\w/);
    expect(rows.find((r) => r.transaction_hash === ex.transactionHash && r.status_kind === 'transaction_status')).toMatchObject({
      status: true,
      description: null,
    });
    for (const r of rows.filter((x) => x.status_kind === 'receipt_status')) {
      const api = (await apiResults(sim.urls.mainnet, sim.apiKey, `/v1/transactions/${r.transaction_hash}/receipt-status`)).data as { status: string };
      expect(r.status).toBe(api.status === '1');
    }
  });

  it('contracts: verified ABI and code record; an unverified contract is a row, not an error', async () => {
    await expectDeclaredTypes(lake, getDataset('contracts'));
    const rows = await queryCatalog(
      lake,
      `SELECT contract_address, origin_endpoint, verified, api_message, json_array_length(abi)::BIGINT AS items, abi::VARCHAR AS abi, swarm_source, contract_name, verify_date FROM contracts ORDER BY 1, 2`,
    );
    expect(rows.length).toBe(4);
    const code = (await apiResults(sim.urls.mainnet, sim.apiKey, `/v1/contracts/${ex.verifiedContract}/code`)).data as Record<string, unknown>;
    const abi = (await apiResults(sim.urls.mainnet, sim.apiKey, `/v1/contracts/${ex.verifiedContract}/abi`)).data as unknown[];
    const v = rows.filter((r) => r.contract_address === ex.verifiedContract);
    expect(v.map((r) => r.verified)).toEqual([true, true]);
    for (const r of v) {
      expect(Number(r.items)).toBe(abi.length);
      expect(JSON.parse(r.abi as string)).toEqual(abi);
    }
    const c = v.find((r) => r.origin_endpoint === 'contract_code')!;
    expect(c.swarm_source).toBe(code['swarm source']);
    expect(c.contract_name).toBe(code.contract_name);
    const u = rows.filter((r) => r.contract_address === ex.unverifiedContract);
    expect(u.map((r) => r.verified)).toEqual([false, false]);
    for (const r of u) {
      expect(r.api_message).toMatch(/not verified/i);
      expect(r.abi).toBeNull();
    }
  });

  // Issue 37: an unverified contract's ABI and code answers ("not verified", HTTP 404 on the simulator) are
  // expected answers, recorded as rows with verified = false: the report counts them as not verified, never
  // as failed requests or windows.
  it('contracts: an unverified contract is counted as not verified, not as failed requests, retries or windows', async () => {
    expect(report.status).toBe('complete');
    expect(report.errors).toEqual([]);
    // The ABI and the code record of the unverified contract: two answers that said "not verified".
    expect(report.notVerified).toBe(2);
    expect(report.failures).toEqual({});
    expect(report.totals.windowsFailed).toBe(0);
    expect(report.totals.retries).toBe(0);
    const text = formatReport(report);
    expect(text).toContain('note: 2 answers said a contract is not verified: recorded as rows with verified = false, not as failures');
    expect(text).not.toMatch(/^failed: /m);
    const rows = await queryCatalog(lake, 'SELECT verified, count(*)::INTEGER AS n FROM contracts GROUP BY 1 ORDER BY 1');
    expect(rows).toEqual([
      { verified: false, n: 2 },
      { verified: true, n: 2 },
    ]);
    const windows = await queryCatalog(lake, "SELECT count(*)::INTEGER AS n FROM windows WHERE status <> 'committed'");
    expect(windows).toEqual([{ n: 0 }]);
  });
});
