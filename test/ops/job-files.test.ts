import { readdirSync, readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Ajv } from 'ajv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobError, loadJobFile, parseJob } from '../../src/pipeline/job.js';
import { jobSchema } from '../../src/pipeline/job-schema.js';
import { tempDir } from '../helpers/lake.js';

const A = '0x36b8f7473cdaa8441b4aa383dd6757c5603d8b8c';
const H = '0x5e05238d036c7c4e3ef4afb71c94de487f7dceec2a5e915363aa69cfaa3d9593';
const ok = { target: 'simulator', datasets: { transactions: { addresses: [A] } } };
const schema = JSON.parse(readFileSync('jobs/job.schema.json', 'utf8')) as object;
const validate = new Ajv({ allErrors: true, strict: false }).compile(schema);

/** Bad job files: what the user wrote, where the error must point, what it must say, and whether the schema alone catches it. */
const BAD: { name: string; doc: unknown; where: string; problem: RegExp; schema: boolean }[] = [
  { name: 'not an object', doc: [1, 2], where: '', problem: /must hold a JSON object/, schema: true },
  { name: 'unknown top-level key', doc: { ...ok, lakes: 'x' }, where: 'lakes', problem: /unknown key/, schema: true },
  { name: 'no datasets', doc: { target: 'simulator' }, where: 'datasets', problem: /at least one dataset/, schema: true },
  {
    name: 'unknown dataset',
    doc: { target: 'simulator', datasets: { trades: {} } },
    where: 'datasets.trades',
    problem: /unknown dataset; known datasets: .*transactions/,
    schema: true,
  },
  { name: 'bad network', doc: { ...ok, network: 'goerli' }, where: 'network', problem: /mainnet, testnet/, schema: true },
  { name: 'bad target', doc: { ...ok, target: 'prod' }, where: 'target', problem: /"api" or "simulator"/, schema: true },
  {
    name: 'bad address',
    doc: { target: 'simulator', datasets: { transactions: { addresses: [A, '0x123'] } } },
    where: 'datasets.transactions.addresses[1]',
    problem: /not an address/,
    schema: true,
  },
  {
    name: 'empty address list',
    doc: { target: 'simulator', datasets: { transactions: { addresses: [] } } },
    where: 'datasets.transactions.addresses',
    problem: /non-empty list/,
    schema: true,
  },
  {
    name: 'scope key the dataset does not take',
    doc: { target: 'simulator', datasets: { transactions: { pools: [A] } } },
    where: 'datasets.transactions.pools',
    problem: /unknown key/,
    schema: true,
  },
  {
    name: 'bad transaction hash',
    doc: { target: 'simulator', datasets: { transaction_status: { transactions: ['0xabc'] } } },
    where: 'datasets.transaction_status.transactions[0]',
    problem: /transaction hash/,
    schema: true,
  },
  { name: 'negative fromBlock', doc: { ...ok, range: { fromBlock: -1 } }, where: 'range.fromBlock', problem: /between 0 and/, schema: true },
  { name: 'non-numeric block', doc: { ...ok, range: { fromBlock: 'ten' } }, where: 'range.fromBlock', problem: /must be an integer/, schema: true },
  {
    name: 'inverted range',
    doc: { ...ok, range: { fromBlock: 100, toBlock: 50 } },
    where: 'range',
    problem: /toBlock 50 is below fromBlock 100/,
    schema: false,
  },
  {
    name: 'incremental with an end',
    doc: { ...ok, range: { incremental: true, toBlock: 50 } },
    where: 'range',
    problem: /incremental range runs up to the head/,
    schema: false,
  },
  { name: 'windowBlocks zero', doc: { ...ok, range: { windowBlocks: 0 } }, where: 'range.windowBlocks', problem: /between 1 and/, schema: true },
  { name: 'windowBlocks fractional', doc: { ...ok, range: { windowBlocks: 1.5 } }, where: 'range.windowBlocks', problem: /must be an integer/, schema: true },
  { name: 'windowBlocks as text', doc: { ...ok, range: { windowBlocks: '100000' } }, where: 'range.windowBlocks', problem: /must be an integer/, schema: true },
  { name: 'concurrency zero', doc: { ...ok, concurrency: 0 }, where: 'concurrency', problem: /between 1 and 256/, schema: true },
  { name: 'non-numeric rps', doc: { ...ok, rps: 'fast' }, where: 'rps', problem: /must be an integer/, schema: true },
  { name: 'page size over the API maximum', doc: { ...ok, pageSize: 5000 }, where: 'pageSize', problem: /between 1 and 1000/, schema: true },
  { name: 'bad cron', doc: { ...ok, schedule: '61 * * * *' }, where: 'schedule', problem: /not a valid cron expression/, schema: false },
  { name: 'bad simulator scale', doc: { ...ok, simulator: { scale: 'huge' } }, where: 'simulator.scale', problem: /small, medium or large/, schema: true },
  { name: 'strict not boolean', doc: { ...ok, strict: 'yes' }, where: 'strict', problem: /true or false/, schema: true },
  {
    name: 'api target without URL',
    doc: { datasets: { transactions: { addresses: [A] } } },
    where: 'endpoints.mainnet',
    problem: /CHAINLAKE_MAINNET_URL/,
    schema: false,
  },
  {
    name: 'URL that is not http',
    doc: { endpoints: { mainnet: 'ftp://x' }, datasets: { transactions: { addresses: [A] } } },
    where: 'endpoints.mainnet',
    problem: /http\(s\) URL/,
    schema: true,
  },
  {
    name: 'event logs with five topics',
    doc: { target: 'simulator', datasets: { event_logs: { contracts: [A], topics: [H, H, H, H, H] } } },
    where: 'datasets.event_logs.topics',
    problem: /up to 4 topics/,
    schema: true,
  },
  { name: 'unknown timeout', doc: { ...ok, timeouts: { readMs: 5 } }, where: 'timeouts.readMs', problem: /unknown key/, schema: true },
  { name: 'retry attempts zero', doc: { ...ok, retry: { maxAttempts: 0 } }, where: 'retry.maxAttempts', problem: /between 1 and 100/, schema: true },
  { name: 'commit policy zero', doc: { ...ok, commit: { everyRows: 0 } }, where: 'commit.everyRows', problem: /between 1 and/, schema: true },
];

describe('job files', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  beforeAll(async () => ({ dir, cleanup } = await tempDir()));
  afterAll(async () => cleanup?.());

  it('the shipped schema is the one the registry generates', () => {
    expect(schema).toEqual(jobSchema());
  });

  it('every shipped job is valid for the validator and the schema', async () => {
    const jobs = readdirSync('jobs').filter((f) => f.endsWith('.json') && f !== 'job.schema.json');
    expect(jobs.length).toBeGreaterThanOrEqual(3);
    for (const f of jobs) {
      const file = path.join('jobs', f);
      const job = await loadJobFile(file, {});
      expect(job.what.datasets.length, f).toBeGreaterThan(0);
      expect(validate(JSON.parse(readFileSync(file, 'utf8'))), `${f}: ${JSON.stringify(validate.errors)}`).toBe(true);
    }
  });

  it.each(BAD)('rejects $name, naming the file, the path and the problem', async ({ doc, where, problem, schema: schemaCatches }) => {
    const file = path.join(dir, 'job.json');
    await writeFile(file, JSON.stringify(doc));
    const err = await loadJobFile(file, {}).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(JobError);
    const e = err as JobError;
    expect(e.file).toBe(file);
    expect(e.where).toBe(where);
    expect(e.problem).toMatch(problem);
    expect(e.message).toContain(file);
    if (schemaCatches) expect(validate(doc)).toBe(false);
  });

  it('reads addresses from a file relative to the job, naming the line of a bad one', async () => {
    await writeFile(path.join(dir, 'addrs.txt'), `# watched\n${A}\n\n0x2222222222222222222222222222222222222222  # treasury\n`);
    const file = path.join(dir, 'from-file.json');
    await writeFile(file, JSON.stringify({ target: 'simulator', datasets: { transactions: { addresses: { file: 'addrs.txt' } } } }));
    const job = await loadJobFile(file, {});
    expect(Object.values(job.what.datasets[0]!.scopes).flat()).toHaveLength(2);

    await writeFile(path.join(dir, 'addrs.txt'), `${A}\nnot-an-address\n`);
    const e = (await loadJobFile(file, {}).catch((x: unknown) => x)) as JobError;
    expect(e).toBeInstanceOf(JobError);
    expect(e.where).toMatch(/addrs\.txt line 2/);

    await writeFile(file, JSON.stringify({ target: 'simulator', datasets: { transactions: { addresses: { file: 'missing.txt' } } } }));
    expect(((await loadJobFile(file, {}).catch((x: unknown) => x)) as JobError).problem).toMatch(/cannot read .*missing\.txt \(ENOENT\)/);
  });

  it('parses a minimal job with sensible defaults', () => {
    const job = parseJob(ok, 'inline', {});
    expect(job).toMatchObject({
      what: { network: 'mainnet' },
      source: { network: 'mainnet', concurrency: 8, pageSize: 1000, resultWindow: 10_000 },
      lake: { dir: 'data/lake', strict: false },
    });
    expect(job.what.range).toEqual({ fromBlock: 0, toBlock: 'head', incremental: false, safetyMarginBlocks: 12, finalityDepth: 0, windowBlocks: 100_000 });
    expect(job.source.retry).toEqual({});
    const tuned = parseJob({ ...ok, burst: 3, retry: { maxAttempts: 4 }, timeouts: { headersMs: 2000, totalMs: 9000 } }, 'inline', {});
    expect(tuned.source).toMatchObject({ burst: 3, retry: { maxAttempts: 4 }, timeouts: { headersMs: 2000, totalMs: 9000 } });
    expect(parseJob({ ...ok, datasets: { transaction_status: { transactions: [H] } } }, 'inline', {}).what.datasets[0]!.name).toBe('transaction_status');
  });

  it('a mistyped dataset or key gets a "did you mean"', () => {
    const problem = (doc: unknown): string => {
      try {
        parseJob(doc, 'inline', {});
      } catch (e) {
        return (e as Error).message;
      }
      return 'parsed';
    };
    expect(problem({ target: 'simulator', datasets: { transaction: { addresses: [A] } } })).toMatch(/unknown dataset \(did you mean "transactions"\?\)/);
    expect(problem({ target: 'simulator', datasets: { erc20_tranfsers: { addresses: [A] } } })).toMatch(/did you mean "erc20_transfers"/);
    expect(problem({ ...ok, concurency: 4 })).toMatch(/unknown key \(did you mean "concurrency"\?\)/);
    // Nothing near: no guess.
    expect(problem({ target: 'simulator', datasets: { trades: {} } })).not.toMatch(/did you mean/);
  });

  it('a job without a name is named after its file', () => {
    expect(parseJob(ok, '/srv/jobs/nightly.json', {}).name).toBe('nightly');
    expect(parseJob(ok, 'jobs/token holders (v2).JSON', {}).name).toBe('token-holders-v2');
    expect(parseJob(ok, '/srv/jobs/.json', {}).name).toBe('job');
    expect(parseJob(ok, 'command line', {}).name).toBe('job');
    expect(parseJob({ ...ok, name: 'given' }, '/srv/jobs/nightly.json', {}).name).toBe('given');
  });
});
