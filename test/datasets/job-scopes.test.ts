import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { lakeNamedBy, runOverrides } from '../../src/cli/common.js';
import { datasetSpecFromFlags } from '../../src/cli/commands/export.js';
import { describeDataset } from '../../src/cli/commands/describe.js';
import { datasetNames, getDataset } from '../../src/datasets/registry.js';
import { JobError, loadJobDocument, parseJob } from '../../src/pipeline/job.js';
import { pagerOptionsOf } from '../../src/pipeline/prepare.js';
import { planWindows } from '../../src/pipeline/plan.js';

const A = (n: number): string => '0x' + n.toString(16).padStart(40, '0');
const H = (n: number): string => '0x' + n.toString(16).padStart(64, '0');
const job = (datasets: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
  parseJob({ name: 't', target: 'simulator', range: { fromBlock: 100 }, datasets, ...extra }, 'job.json', process.env);
const fails = (datasets: Record<string, unknown>, where: RegExp) => {
  try {
    job(datasets);
  } catch (e) {
    expect(e).toBeInstanceOf(JobError);
    expect((e as Error).message).toMatch(where);
    return;
  }
  throw new Error('expected a JobError');
};

describe('job scopes of every kind', () => {
  it('batches balances addresses by 20 (POST #1 takes 1 to 20), deduplicated case-insensitively', () => {
    const addrs = Array.from({ length: 45 }, (_, i) => A(i + 1));
    const j = job({ balances: { addresses: [...addrs, addrs[0]!.toUpperCase().replace('0X', '0x')] } });
    const batches = j.what.datasets[0]!.scopes.address_batch!;
    expect(batches.map((b) => b.addresses!.split(',').length)).toEqual([20, 20, 5]);
    expect(planWindows(j.what, 1000).map((w) => w.range)).toEqual([undefined, undefined, undefined]);
  });

  it('internal_transactions: addresses use #3 (block windows), transactions use #13 (one call each)', () => {
    const j = job({ internal_transactions: { addresses: [A(1)], transactions: [H(5).toUpperCase().replace('0X', '0x')], input: true } });
    const w = planWindows(j.what, 1000);
    expect(w.map((x) => [x.endpoint.id, x.scopeKey, x.range])).toEqual([
      ['account_internal_transactions', `address=${A(1)}&endpoint=account_internal_transactions`, { from: 100, to: 1000 }],
      ['transaction_internal_transactions', `endpoint=transaction_internal_transactions&transaction=${H(5)}`, undefined],
    ]);
    expect(w[0]!.query).toEqual({ input: true });
    expect(new Set(w.map((x) => x.id)).size).toBe(2);
  });

  it('event_logs: contracts with shared or own topics, null for "any", operand', () => {
    const j = job({
      event_logs: { contracts: [A(1), { address: A(2), topics: [H(1), null, H(3)], operand: 'or' }], topics: [H(9)] },
    });
    expect(j.what.datasets[0]!.scopes.contract_topics).toEqual([
      { contract: A(1), topic0: H(9) },
      { contract: A(2), topic0: H(1), topic2: H(3), operand: 'or' },
    ]);
    // Topics are optional (the real service lists a contract's logs by address alone); given ones still filter.
    expect(
      job({ event_logs: { contracts: [A(1), { address: A(2), topics: [null, H(2)] }, { address: A(3), topics: [] }] } }).what.datasets[0]!.scopes
        .contract_topics,
    ).toEqual([{ contract: A(1) }, { contract: A(2), topic1: H(2) }, { contract: A(3) }]);
    fails({ event_logs: { contracts: [A(1)], topics: [H(1), H(2), H(3), H(4), H(5)] } }, /topics: must list up to 4 topics/);
    fails({ event_logs: { contracts: [{ address: A(1), topics: ['0x12'] }] } }, /datasets\.event_logs\.contracts\[0\]\.topics\[0\]: not a topic/);
  });

  it('blocks: numbers and ranges, sorted and deduplicated; staking_rewards without blocks asks for the latest', () => {
    expect(job({ blocks: { blocks: ['5-7', 6, 1] } }).what.datasets[0]!.scopes.block).toEqual([{ block: '1' }, { block: '5' }, { block: '6' }, { block: '7' }]);
    expect(job({ staking_rewards: {} }).what.datasets[0]!.scopes.block_or_latest).toEqual([{}]);
    fails({ blocks: { blocks: ['7-5'] } }, /blocks\[0\]: the range "7-5"/);
  });

  it('tokens, pairs, pools, pids, charts, contracts, none', () => {
    const j = job({
      token_supply: { tokens: [A(3)] },
      token_balances: { pairs: [{ token: A(3), holder: A(4) }] },
      pool_info: { pools: [A(5)] },
      staking_info: { pids: [0, 1, 1] },
      stable_chart: { charts: [{ unit: 'day', unit_count: 7 }] },
      contracts: { contracts: [A(6)] },
      dashboard: {},
    });
    const s = Object.fromEntries(j.what.datasets.map((d) => [d.name, d.scopes]));
    expect(s).toEqual({
      token_supply: { token: [{ token: A(3) }] },
      token_balances: { token_holder: [{ token: A(3), holder: A(4) }] },
      pool_info: { pool: [{ pool: A(5) }] },
      staking_info: { pid: [{ pid: '0' }, { pid: '1' }] },
      stable_chart: { chart: [{ unit: 'day', unit_count: '7', unit_multiplier: '1' }] },
      contracts: { contract: [{ contract: A(6) }] },
      dashboard: { none: [{}] },
    });
    expect(planWindows(j.what, 1000).length).toBe(1 + 1 + 1 + 2 + 1 + 2 + 1);
  });

  it('alternate endpoints only when named; unknown endpoints and keys are clear errors', () => {
    const d = job({ nft_inventory: { tokens: [A(1)] } }).what.datasets[0]!;
    expect(d.endpoints).toEqual(['token_inventory']);
    expect(job({ nft_inventory: { tokens: [A(1)], endpoints: ['erc721_inventory'] } }).what.datasets[0]!.endpoints).toEqual(['erc721_inventory']);
    fails({ nft_inventory: { tokens: [A(1)], endpoints: ['nope'] } }, /unknown endpoint "nope"; this dataset has: account_inventory/);
    fails({ nft_inventory: { tokens: [A(1)], endpoints: ['account_inventory'] } }, /endpoint account_inventory needs addresses/);
    fails({ token_supply: { addresses: [A(1)] } }, /datasets\.token_supply\.addresses: unknown key; expected one of: tokens, endpoints/);
    fails({ token_supply: {} }, /datasets\.token_supply: needs a scope: "tokens"/);
    fails({ transactions: { addresses: ['0x12'] } }, /datasets\.transactions\.addresses\[0\]: not an address/);
    fails({ stable_chart: { charts: [{ unit: 'week', unit_count: 1 }] } }, /charts\[0\]\.unit: must be one of minute, hour, day/);
  });
});

describe('export flags', () => {
  it('map onto the dataset spec, and a flag a dataset cannot use is refused', () => {
    expect(datasetSpecFromFlags(getDataset('event_logs'), { contract: [A(1)], topic0: H(1), topic2: H(2), operand: 'or' })).toEqual({
      contracts: [A(1)],
      topics: [H(1), null, H(2)],
      operand: 'or',
    });
    expect(datasetSpecFromFlags(getDataset('token_balances'), { token: [A(1)], holder: [A(2), A(3)] })).toEqual({
      pairs: [
        { token: A(1), holder: A(2) },
        { token: A(1), holder: A(3) },
      ],
    });
    expect(datasetSpecFromFlags(getDataset('blocks'), { block: ['5', '7-9'] })).toEqual({ blocks: [5, '7-9'] });
    expect(datasetSpecFromFlags(getDataset('stable_chart'), { unit: 'hour' })).toEqual({ charts: [{ unit: 'hour', unit_count: 24, unit_multiplier: 1 }] });
    expect(() => datasetSpecFromFlags(getDataset('pool_info'), { address: [A(1)] })).toThrow(/--address does not apply to pool_info/);
    expect(datasetSpecFromFlags(getDataset('event_logs'), { contract: [A(1)] })).toEqual({ contracts: [A(1)] });
    for (const name of datasetNames()) expect(() => datasetSpecFromFlags(getDataset(name), {})).not.toThrow();
  });
});

describe('describe', () => {
  it('is generated from the declaration: key, partition, endpoints with scopes, notes, every lake column', () => {
    for (const name of datasetNames()) {
      const text = describeDataset(name);
      const def = getDataset(name);
      expect(text).toContain(`natural key: ${def.naturalKey.join(', ')}`);
      for (const e of def.endpoints) expect(text).toContain(`${e.id}: ${e.api} ${e.ref}`);
      for (const c of def.columns) expect(text).toMatch(new RegExp(`\\n    ${c.name} `));
    }
    expect(describeDataset('erc20_transfers')).toMatch(/value_raw\s+VARCHAR/);
    expect(describeDataset('event_logs')).toMatch(/no block number/);
  });
});

describe('the parsed job', () => {
  const doc = { name: 'frozen', target: 'simulator', datasets: { transactions: { addresses: ['0x36b8f7473cdaa8441b4aa383dd6757c5603d8b8c'] } } };

  it('is read-only all the way down', () => {
    const job = parseJob(doc, 'frozen.json', process.env);
    expect(Object.isFrozen(job)).toBe(true);
    expect(Object.isFrozen(job.what.range)).toBe(true);
    expect(Object.isFrozen(job.what.datasets[0]!.scopes)).toBe(true);
    expect(() => {
      (job.what.range as { fromBlock: number }).fromBlock = 5;
    }).toThrow(TypeError);
  });

  it('is resolved by concern (what, source, lake), each frozen: an assignment throws', () => {
    const job = parseJob(doc, 'frozen.json', process.env);
    for (const part of [job.what, job.source, job.source.target, job.lake, job.lake.commit, job.what.datasets]) expect(Object.isFrozen(part)).toBe(true);
    expect(() => {
      (job.source as { concurrency: number }).concurrency = 64;
    }).toThrow(TypeError);
    expect(() => {
      (job as { lake: unknown }).lake = { dir: 'elsewhere' };
    }).toThrow(TypeError);
    expect(job.source.concurrency).toBe(parseJob(doc, 'frozen.json', process.env).source.concurrency);
  });

  it('takes the flags at resolution: --window-blocks reaches the planner, --concurrency the pager, --lake and --strict the lake', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'chainlake-overrides-'));
    try {
      const file = path.join(dir, 'job.json');
      await writeFile(file, JSON.stringify({ ...doc, lake: path.join(dir, 'own'), range: { fromBlock: 0, toBlock: 250 } }));
      const flags = { 'window-blocks': 100, concurrency: 3, lake: path.join(dir, 'flag'), strict: true };
      const { job } = await loadJobDocument(file, {}, (d) => runOverrides(flags, lakeNamedBy(d)));
      expect(planWindows(job.what, 250).map((w) => w.range)).toEqual([
        { from: 0, to: 99 },
        { from: 100, to: 199 },
        { from: 200, to: 250 },
      ]);
      expect(pagerOptionsOf(job.source).prefetch).toBe(3);
      expect(job.lake).toMatchObject({ dir: path.join(dir, 'flag'), strict: true });
      expect(Object.isFrozen(job.what.range)).toBe(true);
      // Without flags the file's own values stand.
      const plain = (await loadJobDocument(file, {}, (d) => runOverrides({}, lakeNamedBy(d)))).job;
      expect(plain.lake.dir).toBe(path.join(dir, 'own'));
      expect(planWindows(plain.what, 250)).toHaveLength(1);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('fills what the file leaves out from JOB_DEFAULTS', async () => {
    const { JOB_DEFAULTS } = await import('../../src/pipeline/job.js');
    const job = parseJob(doc, 'frozen.json', process.env);
    expect(job.source.concurrency).toBe(JOB_DEFAULTS.concurrency);
    expect(job.lake.commit).toEqual(JOB_DEFAULTS.commit);
    expect(job.what.range.windowBlocks).toBe(JOB_DEFAULTS.windowBlocks);
    expect(job.source.pageSize).toBe(JOB_DEFAULTS.pageSize);
    expect(job.lake.strict).toBe(false);
  });

  it('accepts exactly the keys the published schema lists, at every level it checks', async () => {
    const { jobSchema } = await import('../../src/pipeline/job-schema.js');
    const props = (jobSchema() as { properties: Record<string, { properties?: Record<string, unknown> }> }).properties;
    for (const level of [[], ['range'], ['commit'], ['simulator']] as string[][]) {
      const keys = Object.keys(level.length ? props[level[0]!]!.properties! : props);
      expect(keys.length).toBeGreaterThan(1);
      const bad = level.length ? { ...doc, [level[0]!]: { nope: 1 } } : { ...doc, nope: 1 };
      expect(() => parseJob(bad, 'bad.json', process.env)).toThrow(
        new RegExp(`${level.length ? `${level[0]}\\.` : ''}nope: unknown key; expected one of: ${keys.join(', ').replace(/\$/g, '\\$')}`),
      );
    }
    expect(() => parseJob({ ...doc, strict: 'yes' }, 'bad.json', process.env)).toThrow(/strict: must be true or false/);
  });
});
