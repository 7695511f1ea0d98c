import { readFile } from 'node:fs/promises';
import { datasetNames, DATASETS } from '../datasets/registry.js';
import type { Network, ScopeKind } from '../datasets/dataset.js';
import type { Query } from '../extract/explorer.js';
import { cronProblem } from '../schedule/cron.js';

/** A job file problem: which file, where inside it, and what is wrong. Exit code 2. */
export class JobError extends Error {
  constructor(
    readonly file: string,
    readonly where: string,
    readonly problem: string,
  ) {
    super(`${file}: ${where ? `${where}: ` : ''}${problem}`);
    this.name = 'JobError';
  }
}

export interface SimulatorTarget {
  kind: 'simulator';
  seed?: number;
  scale?: 'small' | 'medium' | 'large';
}

export interface ApiTarget {
  kind: 'api';
  explorer: string;
  explorerAlt?: string;
  finance?: string;
}

export interface DatasetJob {
  name: string;
  /** One scope per window family, e.g. [{ address: '0x…' }]. */
  scopes: Record<string, string>[];
  /** Extra query parameters the job asks for (e.g. input=true). */
  query: Query;
}

/** A validated job: what to fetch, from where, into which lake, how politely. */
export interface Job {
  name: string;
  file: string;
  network: Network;
  target: SimulatorTarget | ApiTarget;
  /** Never logged, printed or stored. */
  apiKey?: string;
  lake: string;
  range: { fromBlock: number; toBlock: number | 'head' };
  concurrency: number;
  rps?: number;
  strict: boolean;
  /** Cron expression (UTC) for `chainlake schedule`. */
  schedule?: string;
  pageSize: number;
  resultWindow: number;
  datasets: DatasetJob[];
}

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;
const NETWORKS: readonly Network[] = ['mainnet', 'testnet'];

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);

/** The environment variables that name each network's base URL (used when the job does not). */
export const ENDPOINT_ENV = {
  mainnet: 'CHAINLAKE_MAINNET_URL',
  testnet: 'CHAINLAKE_TESTNET_URL',
  testnetAlt: 'CHAINLAKE_TESTNET_ALT_URL',
  finance: 'CHAINLAKE_FINANCE_URL',
} as const;

class Reader {
  constructor(readonly file: string) {}
  fail(where: string, problem: string): never {
    throw new JobError(this.file, where, problem);
  }
  int(v: unknown, where: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
    if (typeof v !== 'number' || !Number.isInteger(v)) this.fail(where, `must be an integer, got ${JSON.stringify(v)}`);
    if (v < min || v > max) this.fail(where, `must be between ${min} and ${max}, got ${v}`);
    return v;
  }
  str(v: unknown, where: string): string {
    if (typeof v !== 'string' || v === '') this.fail(where, `must be a non-empty string, got ${JSON.stringify(v)}`);
    return v;
  }
  keys(o: Obj, where: string, allowed: readonly string[]): void {
    for (const k of Object.keys(o)) {
      if (!allowed.includes(k)) this.fail(where ? `${where}.${k}` : k, `unknown key; expected one of: ${allowed.join(', ')}`);
    }
  }
}

function scopesFor(r: Reader, kind: ScopeKind, spec: Obj, where: string): Record<string, string>[] {
  switch (kind) {
    case 'address': {
      const list = spec.addresses;
      if (!Array.isArray(list) || list.length === 0) r.fail(`${where}.addresses`, 'must be a non-empty list of addresses');
      const seen = new Set<string>();
      return list.flatMap((a, i) => {
        if (typeof a !== 'string' || !ADDRESS.test(a)) r.fail(`${where}.addresses[${i}]`, `not an address (0x + 40 hex digits): ${JSON.stringify(a)}`);
        const lower = a.toLowerCase();
        if (seen.has(lower)) return [];
        seen.add(lower);
        return [{ address: lower }];
      });
    }
    default:
      return r.fail(where, `scope kind '${kind}' is not supported by job files yet`);
  }
}

function cronOf(r: Reader, v: unknown): string {
  const expr = r.str(v, 'schedule');
  const problem = cronProblem(expr);
  if (problem) r.fail('schedule', `not a valid cron expression (${problem}), e.g. "15 2 * * *" for 02:15 UTC daily`);
  return expr;
}

/** Validates a parsed job document. Environment supplies the API key and any base URL the job leaves out. */
export function parseJob(doc: unknown, file: string, env: NodeJS.ProcessEnv = process.env): Job {
  const r: Reader = new Reader(file);
  if (!isObj(doc)) r.fail('', 'a job file must hold a JSON object');
  r.keys(doc, '', [
    '$schema',
    'name',
    'description',
    'network',
    'target',
    'simulator',
    'endpoints',
    'apiKey',
    'lake',
    'range',
    'concurrency',
    'rps',
    'strict',
    'pageSize',
    'resultWindow',
    'schedule',
    'datasets',
  ]);

  const name = doc.name === undefined ? 'job' : r.str(doc.name, 'name');
  if (!NAME.test(name)) r.fail('name', `may hold letters, digits, '_', '-' and '.', got ${JSON.stringify(name)}`);
  const network = (doc.network ?? 'mainnet') as Network;
  if (!NETWORKS.includes(network)) r.fail('network', `must be one of ${NETWORKS.join(', ')}, got ${JSON.stringify(doc.network)}`);

  let target: Job['target'];
  const targetKind = doc.target ?? 'api';
  if (targetKind === 'simulator') {
    const sim = doc.simulator === undefined ? {} : doc.simulator;
    if (!isObj(sim)) r.fail('simulator', 'must be an object');
    r.keys(sim, 'simulator', ['seed', 'scale']);
    const scale = sim.scale;
    if (scale !== undefined && scale !== 'small' && scale !== 'medium' && scale !== 'large')
      r.fail('simulator.scale', `must be small, medium or large, got ${JSON.stringify(scale)}`);
    target = { kind: 'simulator', seed: sim.seed === undefined ? undefined : r.int(sim.seed, 'simulator.seed', 0, 2 ** 32 - 1), scale };
  } else if (targetKind === 'api') {
    const ep = doc.endpoints === undefined ? {} : doc.endpoints;
    if (!isObj(ep)) r.fail('endpoints', 'must be an object');
    r.keys(ep, 'endpoints', ['mainnet', 'testnet', 'testnetAlt', 'finance']);
    const url = (key: keyof typeof ENDPOINT_ENV): string | undefined => {
      const v = ep[key] ?? env[ENDPOINT_ENV[key]];
      if (v === undefined || v === '') return undefined;
      if (typeof v !== 'string' || !/^https?:\/\/\S+$/.test(v)) r.fail(`endpoints.${key}`, `must be an http(s) URL, got ${JSON.stringify(v)}`);
      return v;
    };
    const explorer = url(network);
    if (!explorer) r.fail(`endpoints.${network}`, `no ${network} base URL: set it in the job or in ${ENDPOINT_ENV[network]}`);
    target = { kind: 'api', explorer, explorerAlt: network === 'testnet' ? url('testnetAlt') : undefined, finance: url('finance') };
  } else {
    r.fail('target', `must be "api" or "simulator", got ${JSON.stringify(targetKind)}`);
  }

  const lake = doc.lake === undefined ? 'data/lake' : r.str(doc.lake, 'lake');

  const rangeDoc = doc.range ?? {};
  if (!isObj(rangeDoc)) r.fail('range', 'must be an object like {"fromBlock": 0, "toBlock": "head"}');
  r.keys(rangeDoc, 'range', ['fromBlock', 'toBlock']);
  const fromBlock = rangeDoc.fromBlock === undefined ? 0 : r.int(rangeDoc.fromBlock, 'range.fromBlock', 0);
  const toBlock = rangeDoc.toBlock === undefined || rangeDoc.toBlock === 'head' ? 'head' : r.int(rangeDoc.toBlock, 'range.toBlock', 0);
  if (toBlock !== 'head' && toBlock < fromBlock) r.fail('range', `toBlock ${toBlock} is below fromBlock ${fromBlock}`);

  const datasetsDoc = doc.datasets;
  if (!isObj(datasetsDoc) || Object.keys(datasetsDoc).length === 0)
    r.fail('datasets', 'must be an object naming at least one dataset, e.g. {"transactions": {"addresses": ["0x…"]}}');
  const datasets: DatasetJob[] = Object.entries(datasetsDoc).map(([dsName, spec]) => {
    const where = `datasets.${dsName}`;
    const def = DATASETS[dsName];
    if (!def) r.fail(where, `unknown dataset; known datasets: ${datasetNames().join(', ')}`);
    if (!isObj(spec)) r.fail(where, 'must be an object with the scope of the dataset');
    r.keys(spec, where, ['addresses', 'input']);
    const query: Query = {};
    if (spec.input !== undefined) {
      if (typeof spec.input !== 'boolean') r.fail(`${where}.input`, 'must be true or false');
      query.input = spec.input;
    }
    return { name: dsName, scopes: scopesFor(r, def.scope, spec, where), query };
  });

  const apiKey = doc.apiKey !== undefined ? r.str(doc.apiKey, 'apiKey') : env.CHAINLAKE_API_KEY || undefined;

  return {
    name,
    file,
    network,
    target,
    apiKey,
    lake,
    range: { fromBlock, toBlock },
    concurrency: doc.concurrency === undefined ? 8 : r.int(doc.concurrency, 'concurrency', 1, 256),
    rps: doc.rps === undefined ? undefined : r.int(doc.rps, 'rps', 1, 100_000),
    strict: doc.strict === undefined ? false : doc.strict === true ? true : doc.strict === false ? false : r.fail('strict', 'must be true or false'),
    pageSize: doc.pageSize === undefined ? 1000 : r.int(doc.pageSize, 'pageSize', 1, 1000),
    resultWindow: doc.resultWindow === undefined ? 10_000 : r.int(doc.resultWindow, 'resultWindow', 1),
    schedule: doc.schedule === undefined ? undefined : cronOf(r, doc.schedule),
    datasets,
  };
}

export async function loadJobFile(file: string, env: NodeJS.ProcessEnv = process.env): Promise<Job> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    throw new JobError(file, '', `cannot read the job file (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw new JobError(file, '', `not valid JSON: ${(e as Error).message}`);
  }
  return parseJob(doc, file, env);
}
