import { scopeKindsOf, type ScopeKind } from '../datasets/dataset.js';
import { datasetNames, getDataset } from '../datasets/registry.js';
import { STANDARD_CHOICES } from '../decode/spec.js';
import { COMMIT_OPTIONS, groupSchema, optionSchema, RANGE_OPTIONS, RETRY_OPTIONS, TIMEOUT_OPTIONS, TOP_OPTIONS } from './job-options.js';

/** The job key of a dataset spec that feeds each scope kind (see src/datasets/dataset.ts). */
export const SCOPE_KEYS: Record<ScopeKind, readonly string[]> = {
  address: ['addresses'],
  address_batch: ['addresses'],
  transaction: ['transactions'],
  contract: ['contracts'],
  contract_topics: ['contracts', 'topics', 'operand', 'type'],
  token: ['tokens'],
  token_holder: ['pairs'],
  block: ['blocks'],
  block_or_latest: ['blocks'],
  pool: ['pools'],
  pid: ['pids'],
  chart: ['charts'],
  none: [],
};

/**
 * The JSON Schema of job files, generated from the dataset registry so it always names every dataset and
 * exactly the scope keys each accepts. Editors use it (`"$schema": "./job.schema.json"`) for completion and
 * checking as you type; `chainlake` itself validates with the stricter checks of job.ts (address formats,
 * ranges, cron), and a test keeps the two in agreement. Regenerate with `chainlake schema > jobs/job.schema.json`.
 */
type Schema = Record<string, unknown>;

const address: Schema = { type: 'string', pattern: '^0x[0-9a-fA-F]{40}$' };
const hash: Schema = { type: 'string', pattern: '^0x[0-9a-fA-F]{64}$' };
const fromFile: Schema = {
  type: 'object',
  description: 'Read the list from a text file: one item per line, # starts a comment; relative to the job file.',
  properties: { file: { type: 'string', minLength: 1 } },
  required: ['file'],
  additionalProperties: false,
};
const listOf = (item: Schema, description: string, file = false): Schema => {
  const arr = { type: 'array', items: item, minItems: 1 };
  return file ? { description, oneOf: [arr, fromFile] } : { description, ...arr };
};
const topics: Schema = {
  type: 'array',
  minItems: 0,
  maxItems: 4,
  items: { oneOf: [hash, { type: 'null' }] },
  description: '[topic0?, topic1?, topic2?, topic3?]; null means any; none: all logs of the contract (the spec requires topic0)',
};
const operand: Schema = { enum: ['and', 'or'] };
const logType: Schema = { enum: ['single', 'combine'] };

const SCOPE_SCHEMAS: Record<string, Schema> = {
  addresses: listOf(address, 'Addresses (0x + 40 hex digits), inline or {"file": "…"}', true),
  transactions: listOf(hash, 'Transaction hashes, inline or {"file": "…"}', true),
  contracts: listOf(
    {
      oneOf: [address, { type: 'object', properties: { address, topics, operand, type: logType }, required: ['address'], additionalProperties: false }],
    },
    'Contract addresses, or {"address", "topics", "operand", "type"} filters (event_logs)',
  ),
  topics,
  operand,
  type: logType,
  tokens: listOf(address, 'Token contract addresses'),
  pairs: listOf(
    { type: 'object', properties: { token: address, holder: address }, required: ['token', 'holder'], additionalProperties: false },
    'Token and holder pairs',
  ),
  blocks: listOf(
    {
      oneOf: [
        { type: 'integer', minimum: 0 },
        { type: 'string', pattern: '^\\d+\\s*-\\s*\\d+$' },
      ],
    },
    'Block numbers or "from-to" ranges',
  ),
  pools: listOf(address, 'Pool contract addresses'),
  pids: listOf({ type: 'integer', minimum: 0 }, 'Staking pool ids'),
  charts: listOf(
    {
      type: 'object',
      properties: { unit: { enum: ['minute', 'hour', 'day'] }, unit_count: { type: 'integer', minimum: 1 }, unit_multiplier: { type: 'integer', minimum: 1 } },
      required: ['unit', 'unit_count'],
      additionalProperties: false,
    },
    'Chart requests',
  ),
};

function datasetSchema(name: string): Schema {
  const def = getDataset(name);
  const keys = [...new Set(scopeKindsOf(def).flatMap((k) => SCOPE_KEYS[k]))];
  const properties: Record<string, Schema> = {};
  for (const k of keys) properties[k] = SCOPE_SCHEMAS[k] ?? {};
  properties.endpoints = listOf({ enum: def.endpoints.map((e) => e.id) }, "Which of the dataset's endpoints to fetch (default: its primary ones)");
  if (def.columns.some((c) => c.name === 'input')) properties.input = { type: 'boolean', description: 'Ask the API for input data' };
  return { type: 'object', description: def.doc, properties, additionalProperties: false };
}

/** An object of keys that admits no other key. */
const group = (description: string, properties: Record<string, Schema>): Schema => ({ type: 'object', description, properties, additionalProperties: false });
const int = (minimum: number): Schema => ({ type: 'integer', minimum });
const url: Schema = { type: 'string', pattern: '^https?://\\S+$' };

// From where: the embedded simulator, or the real APIs and the paths that replace their endpoints' defaults.

function simulatorSchema(): Schema {
  return group('The embedded simulator, when `target` is "simulator".', {
    seed: { ...int(0), description: 'Seeds the simulated chain: one seed, one chain.', default: 1 },
    scale: { enum: ['small', 'medium', 'large'], description: 'How much chain the simulator holds.', default: 'small' },
    dialect: { enum: ['spec', 'real'], description: 'Answer as the spec documents (spec) or as the real service does (real).', default: 'spec' },
    chain: { enum: ['demo', 'sparse'], description: 'The demo chain, or a sparse one with a far head.', default: 'demo' },
  });
}

function endpointsSchema(): Schema {
  return group(
    'Base URLs of the real APIs (`target` "api"). Default: the CHAINLAKE_MAINNET_URL, CHAINLAKE_TESTNET_URL, CHAINLAKE_TESTNET_ALT_URL and CHAINLAKE_FINANCE_URL variables.',
    {
      mainnet: { ...url, description: 'The mainnet explorer API. Default: CHAINLAKE_MAINNET_URL.' },
      testnet: { ...url, description: 'The testnet explorer API. Default: CHAINLAKE_TESTNET_URL.' },
      testnetAlt: { ...url, description: "The testnet's second explorer, for its alternate endpoints. Default: CHAINLAKE_TESTNET_ALT_URL." },
      finance: { ...url, description: 'The finance analytics API. Default: CHAINLAKE_FINANCE_URL.' },
    },
  );
}

/** One key per endpoint id of every dataset. */
function pathsSchema(): Schema {
  return group(
    'Paths that replace endpoints\' defaults, by endpoint id (chainlake describe --endpoints), e.g. {"total_chart": "/usdx/total_chart"}',
    Object.fromEntries(
      datasetNames().flatMap((n) =>
        getDataset(n).endpoints.map((e) => [e.id, { type: 'string', pattern: '^/[^\\s?#]*$', description: `${e.api} ${e.ref}; default ${e.path}` }]),
      ),
    ),
  );
}

// How: which blocks, and the policies of committing, retrying and timing out (the rest are single options).

function rangeSchema(): Schema {
  return group('Which blocks the block-ranged datasets cover. Default: from block 0 to the head.', {
    ...groupSchema(RANGE_OPTIONS),
    toBlock: { oneOf: [int(0), { const: 'head' }], description: optionSchema(RANGE_OPTIONS.toBlock).description, default: 'head' },
  });
}

const commitSchema = (): Schema => group('When a run commits what it has fetched.', groupSchema(COMMIT_OPTIONS));
const retrySchema = (): Schema => group('The retry policy of every call.', groupSchema(RETRY_OPTIONS));
const timeoutsSchema = (): Schema => group('The timeouts of every call.', groupSchema(TIMEOUT_OPTIONS));

// What to fetch: the datasets and their scopes, and the decoded-event datasets written beside them.

/** A contract whose events to decode, by its ABI or the signatures given. */
const decodedContract: Schema = {
  type: 'object',
  properties: {
    address,
    name: { type: 'string', pattern: '^[A-Za-z][A-Za-z0-9_]*$', description: 'Names the datasets <name>_<event>' },
    abiFile: { type: 'string', description: 'A JSON ABI file, relative to the job file (default: the ABI in the contracts dataset)' },
    signatures: listOf({ type: 'string' }, 'Event signatures, e.g. "Swap(address indexed sender, uint256 amount0In)"'),
    events: listOf({ type: 'string' }, 'Only these events of the ABI'),
  },
  required: ['address'],
  additionalProperties: false,
};

function decodeSchema(): Schema {
  return group('Decoded-event datasets written in the same run from the event logs it exports (see README, Decoded events)', {
    standard: listOf({ enum: STANDARD_CHOICES }, 'Standard token events: erc20, erc721, erc1155, or single decoded datasets'),
    tokens: listOf(address, 'Standard events only of these token contracts (default: every contract)'),
    contracts: listOf(decodedContract, 'Contracts whose events to decode'),
  });
}

function datasetsSchema(): Schema {
  return {
    type: 'object',
    description: "What to export: dataset name → its scopes (chainlake describe <dataset> lists each one's keys). Required.",
    minProperties: 1,
    additionalProperties: false,
    properties: Object.fromEntries(datasetNames().map((n) => [n, datasetSchema(n)])),
  };
}

/**
 * The schema's keys are in the order docs/job-reference.md lists them (it is generated from this): the file's own
 * keys, from where, into which lake, how, then what to fetch.
 */
export function jobSchema(): Schema {
  const TOP = groupSchema(TOP_OPTIONS);
  return {
    $schema: 'http://json-schema.org/draft-07/schema#',
    title: 'chainlake job',
    type: 'object',
    required: ['datasets'],
    additionalProperties: false,
    properties: {
      $schema: { type: 'string', description: 'The JSON Schema editors check the file against (`./job.schema.json`); ignored by chainlake.' },
      name: TOP.name,
      description: { type: 'string', description: 'Free text for people reading the job; ignored by chainlake.' },
      network: TOP.network,
      target: TOP.target,
      simulator: simulatorSchema(),
      endpoints: endpointsSchema(),
      apiKey: TOP.apiKey,
      lake: TOP.lake,
      range: rangeSchema(),
      concurrency: TOP.concurrency,
      rps: TOP.rps,
      strict: TOP.strict,
      pageSize: TOP.pageSize,
      resultWindow: TOP.resultWindow,
      schedule: TOP.schedule,
      commit: commitSchema(),
      dailyRequestQuota: TOP.dailyRequestQuota,
      burst: TOP.burst,
      retry: retrySchema(),
      timeouts: timeoutsSchema(),
      paths: pathsSchema(),
      decode: decodeSchema(),
      datasets: datasetsSchema(),
    },
  };
}
