import type { Network } from '../datasets/dataset.js';
import type { Accounting } from './accounting.js';
import { countOf, ShapeError, type ApiCaller, type CheckedBody, type Query } from './endpoint.js';
import type { ListScan } from './scan.js';
import { EnvelopeFailure, type HttpTransport } from './transport.js';

export type { Query, QueryValue } from './endpoint.js';

export interface ExplorerConfig {
  /** Base URL of the network, e.g. https://host/api (paths start with /v1 below it). */
  baseUrl: string;
  /** Testnet only: the other host that serves internal transactions by transaction hash (#13). */
  altBaseUrl?: string;
  apiKey?: string;
  /** The network this client talks to: on testnet, #13 goes to `altBaseUrl`. */
  network?: Network;
}

/** The explorer's success envelope carries the text of the HTTP success code. */
export const EXPLORER_SUCCESS = '200';

/** Where an explorer envelope keeps what `get` returns. */
const EXPLORER_RESULTS_AT = ['results'] as const;

/**
 * Success is HTTP 200 and an envelope whose `status` is the success code. A throttle or server-error status
 * inside an HTTP 200 is transient; any other status is the API refusing the call.
 */
export function checkExplorerEnvelope(body: unknown): unknown {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new EnvelopeFailure('transient', undefined, 'the body is not an envelope object');
  }
  const { status, message, results } = body as Record<string, unknown>;
  const text = typeof message === 'string' ? message : '';
  if (status === EXPLORER_SUCCESS) {
    if (results === undefined) throw new EnvelopeFailure('terminal', String(status), 'success envelope without results');
    return results;
  }
  const code = typeof status === 'string' ? status : JSON.stringify(status);
  if (code === '429' || /rate limit|too many requests|throttl/i.test(text)) throw new EnvelopeFailure('transient', code, text, true);
  if (/^5\d\d$/.test(code ?? '')) throw new EnvelopeFailure('transient', code, text);
  throw new EnvelopeFailure('terminal', code, text || 'the envelope reports a failure');
}

export function buildUrl(baseUrl: string, path: string, query: Query = {}): URL {
  const url = new URL(baseUrl.replace(/\/+$/, '') + path);
  for (const [k, v] of Object.entries(query)) if (v !== undefined) url.searchParams.set(k, String(v));
  return url;
}

/** Offset paging of the listing endpoints. */
export interface Paging {
  limit?: number;
  offset?: number;
}

/** Block filters of endpoints 2 to 5. */
export interface BlockFilter {
  startBlock?: number;
  endBlock?: number;
}

/** One API entry as the explorer sends it: string values (nulls where there is no value), a few lists and booleans. */
export type ApiEntry = Record<string, unknown>;

/** The `results` of a listing endpoint. */
export interface ListResults<E = ApiEntry> {
  count: string;
  data: E[];
  [beside: string]: unknown;
}

/** The `results` of a single-record endpoint. */
export interface RecordResults<D = ApiEntry> {
  data: D;
  [beside: string]: unknown;
}

export interface TransactionsQuery extends Paging, BlockFilter {
  input?: boolean;
  simple?: boolean;
  condition?: 'all' | 'to' | 'from' | 'contract';
}

export interface EventLogsQuery extends Paging {
  /** The contract whose logs are listed (required). */
  address: string;
  /** Required by the spec; the real service lists all of the address's logs without it. */
  topic0?: string;
  topic1?: string;
  topic2?: string;
  topic3?: string;
  startBlock?: number;
  endBlock?: number;
  type?: 'single' | 'combine';
  operand?: 'and' | 'or';
}

/** The verification request (#16). The source is plain text here; the client base64-encodes it as the API wants. */
export interface VerifyRequest {
  contractName: string;
  compiler: string;
  runsOptimizer: number;
  optimizationEnabled: boolean;
  source: string;
  constructorArguments?: string;
  libraries?: unknown[];
}

/** The spec's bound on the addresses of one POST balance call (#1). */
export const BALANCE_BATCH_MAX = 20;
const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const HASH = /^0x[0-9a-fA-F]{64}$/;

function need(ok: boolean, what: string): void {
  if (!ok) throw new RangeError(what);
}

const seg = encodeURIComponent;

/**
 * The explorer API over the shared transport. `get`/`post` are generic (the dataset fetcher uses them);
 * below them one thin typed method per endpoint of the spec (rows 1 to 25).
 */
export class ExplorerClient implements ApiCaller {
  constructor(
    private readonly transport: HttpTransport,
    private readonly config: ExplorerConfig,
  ) {}

  get network(): Network | undefined {
    return this.config.network;
  }

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    const h: Record<string, string> = { accept: 'application/json', ...extra };
    if (this.config.apiKey) h['api-key'] = this.config.apiKey;
    return h;
  }

  /** GET an explorer path; returns the envelope's `results`. `host: 'alt'` uses the testnet alternate host. */
  async get(endpoint: string, path: string, query: Query, acct: Accounting, host: 'main' | 'alt' = 'main'): Promise<unknown> {
    return (await this.getBody(endpoint, path, query, acct, host)).results;
  }

  /** As `get`, with the body's bytes (and, asked for with `scan`, the list at `scan.at` below `results`). */
  getBody(endpoint: string, path: string, query: Query, acct: Accounting, host: 'main' | 'alt' = 'main', scan?: ListScan): Promise<CheckedBody> {
    if (host === 'alt' && !this.config.altBaseUrl) {
      return Promise.reject(
        new Error(
          `${endpoint}: this call is served by the testnet alternate host, and no alternate base URL is configured (endpoints.testnetAlt or CHAINLAKE_TESTNET_ALT_URL)`,
        ),
      );
    }
    const base = host === 'alt' ? this.config.altBaseUrl! : this.config.baseUrl;
    return this.transport.call(
      { endpoint, url: buildUrl(base, path, query), method: 'GET', headers: this.headers() },
      (body, bytes, list) => ({
        results: checkExplorerEnvelope(body),
        bytes,
        resultsAt: EXPLORER_RESULTS_AT,
        list,
        message: typeof (body as { message?: unknown }).message === 'string' ? (body as { message: string }).message : undefined,
      }),
      acct,
      scan && { ...scan, at: [...EXPLORER_RESULTS_AT, ...scan.at] },
    );
  }

  post(endpoint: string, path: string, body: unknown, acct: Accounting): Promise<unknown> {
    return this.transport.call(
      {
        endpoint,
        url: buildUrl(this.config.baseUrl, path),
        method: 'POST',
        headers: this.headers({ 'content-type': 'application/json' }),
        body: JSON.stringify(body),
      },
      checkExplorerEnvelope,
      acct,
    );
  }

  /**
   * The chain head, pinned at run start so that windows end at or below it and new blocks cannot shift
   * offsets while we page. Uses `GET /v1/blocks/latest` (see docs/api-assumptions.md).
   */
  async head(acct: Accounting): Promise<number> {
    const results = await this.get('explorer #17 (latest)', '/v1/blocks/latest', {}, acct);
    const data = (results as { data?: { block_number?: unknown } } | null)?.data;
    const n = Number(data?.block_number);
    if (!Number.isSafeInteger(n) || n < 0) {
      throw new Error(`explorer #17 (latest): the head block number is not an integer: ${JSON.stringify(data?.block_number)}`);
    }
    return n;
  }

  private async list(label: string, path: string, query: Query, acct: Accounting, host: 'main' | 'alt' = 'main'): Promise<ListResults> {
    const r = await this.get(label, path, query, acct, host);
    const o = r as Record<string, unknown> | null;
    if (o === null || typeof o !== 'object' || !Array.isArray(o.data) || !Number.isSafeInteger(countOf(o.count))) {
      throw new ShapeError(label, path, `expected results with a count and a data list, got ${JSON.stringify(r)?.slice(0, 80)}`);
    }
    return o as ListResults;
  }

  private async record(label: string, path: string, query: Query, acct: Accounting): Promise<RecordResults> {
    const r = await this.get(label, path, query, acct);
    const o = r as Record<string, unknown> | null;
    if (o === null || typeof o !== 'object' || o.data === undefined || o.data === null) {
      throw new ShapeError(label, path, `expected results with data, got ${JSON.stringify(r)?.slice(0, 80)}`);
    }
    return o as RecordResults;
  }

  private static address(v: string, what: string): string {
    need(typeof v === 'string' && ADDRESS.test(v), `${what} must be an address (0x + 40 hex digits), got ${JSON.stringify(v)}`);
    return v;
  }

  private static hash(v: string, what: string): string {
    need(typeof v === 'string' && HASH.test(v), `${what} must be a transaction hash (0x + 64 hex digits), got ${JSON.stringify(v)}`);
    return v;
  }

  /** #1 POST /v1/accounts/balance: native balances of 1 to 20 addresses. */
  async balances(addresses: readonly string[], acct: Accounting): Promise<ListResults['data']> {
    need(
      Array.isArray(addresses) && addresses.length >= 1 && addresses.length <= BALANCE_BATCH_MAX,
      `explorer #1: balances take 1 to ${BALANCE_BATCH_MAX} addresses per call, got ${Array.isArray(addresses) ? addresses.length : typeof addresses}`,
    );
    addresses.forEach((a, i) => ExplorerClient.address(a, `explorer #1: addresses[${i}]`));
    const r = (await this.post('explorer #1', '/v1/accounts/balance', { addresses }, acct)) as Record<string, unknown> | null;
    if (!r || !Array.isArray(r.data))
      throw new ShapeError('explorer #1', '/v1/accounts/balance', `expected results.data to be a list, got ${JSON.stringify(r)?.slice(0, 80)}`);
    return r.data as ApiEntry[];
  }

  /** #2 GET /v1/accounts/{address}/transactions. */
  async transactions(address: string, q: TransactionsQuery, acct: Accounting): Promise<ListResults> {
    const a = seg(ExplorerClient.address(address, 'explorer #2: address'));
    return this.list('explorer #2', `/v1/accounts/${a}/transactions`, { ...q }, acct);
  }

  /** #3 GET /v1/accounts/{address}/internal-transactions. */
  async internalTransactions(address: string, q: Paging & BlockFilter & { input?: boolean }, acct: Accounting): Promise<ListResults> {
    const a = seg(ExplorerClient.address(address, 'explorer #3: address'));
    return this.list('explorer #3', `/v1/accounts/${a}/internal-transactions`, { ...q }, acct);
  }

  /** #4 GET /v1/accounts/{address}/token-transfer/erc20. */
  async erc20Transfers(address: string, q: Paging & BlockFilter, acct: Accounting): Promise<ListResults> {
    const a = seg(ExplorerClient.address(address, 'explorer #4: address'));
    return this.list('explorer #4', `/v1/accounts/${a}/token-transfer/erc20`, { ...q }, acct);
  }

  /** #5 GET /v1/accounts/{address}/token-transfer/erc721. */
  async erc721Transfers(address: string, q: Paging & BlockFilter, acct: Accounting): Promise<ListResults> {
    const a = seg(ExplorerClient.address(address, 'explorer #5: address'));
    return this.list('explorer #5', `/v1/accounts/${a}/token-transfer/erc721`, { ...q }, acct);
  }

  /** #6 GET /v1/accounts/{address}/tokens: the `erc_20` and `erc_721` holding groups. */
  async tokens(address: string, q: Paging, acct: Accounting): Promise<Record<string, unknown>> {
    const a = seg(ExplorerClient.address(address, 'explorer #6: address'));
    const r = await this.get('explorer #6', `/v1/accounts/${a}/tokens`, { ...q }, acct);
    if (r === null || typeof r !== 'object') throw new ShapeError('explorer #6', `/v1/accounts/${a}/tokens`, 'results is not an object');
    return r as Record<string, unknown>;
  }

  /** #7 GET /v1/accounts/{address}/tokens/erc20. */
  async erc20Tokens(address: string, q: Paging, acct: Accounting): Promise<ListResults> {
    const a = seg(ExplorerClient.address(address, 'explorer #7: address'));
    return this.list('explorer #7', `/v1/accounts/${a}/tokens/erc20`, { ...q }, acct);
  }

  /** #8 GET /v1/accounts/{address}/tokens/erc721. */
  async erc721Tokens(address: string, q: Paging, acct: Accounting): Promise<ListResults> {
    const a = seg(ExplorerClient.address(address, 'explorer #8: address'));
    return this.list('explorer #8', `/v1/accounts/${a}/tokens/erc721`, { ...q }, acct);
  }

  /** #9 GET /v1/accounts/{address}/tokens/inventory[/{token}]: NFTs the address holds, optionally of one contract. */
  async accountInventory(address: string, token: string | undefined, q: Paging, acct: Accounting): Promise<ListResults> {
    const a = seg(ExplorerClient.address(address, 'explorer #9: address'));
    const t = token === undefined ? '' : `/${seg(ExplorerClient.address(token, 'explorer #9: token'))}`;
    return this.list('explorer #9', `/v1/accounts/${a}/tokens/inventory${t}`, { ...q }, acct);
  }

  /** #10 GET /v1/accounts/{address}/mined-blocks. */
  async minedBlocks(address: string, q: Paging, acct: Accounting): Promise<ListResults> {
    const a = seg(ExplorerClient.address(address, 'explorer #10: address'));
    return this.list('explorer #10', `/v1/accounts/${a}/mined-blocks`, { ...q }, acct);
  }

  /** #11 GET /v1/transactions/{hash}/transaction-status. */
  async transactionStatus(hash: string, acct: Accounting): Promise<RecordResults> {
    const h = seg(ExplorerClient.hash(hash, 'explorer #11: transaction hash'));
    return this.record('explorer #11', `/v1/transactions/${h}/transaction-status`, {}, acct);
  }

  /** #12 GET /v1/transactions/{hash}/receipt-status. */
  async receiptStatus(hash: string, acct: Accounting): Promise<RecordResults> {
    const h = seg(ExplorerClient.hash(hash, 'explorer #12: transaction hash'));
    return this.record('explorer #12', `/v1/transactions/${h}/receipt-status`, {}, acct);
  }

  /** #13 GET /v1/transactions/{hash}/internal-transactions: no offset; on testnet served by the alternate host. */
  async transactionInternalTransactions(hash: string, q: { limit?: number; input?: boolean }, acct: Accounting): Promise<ListResults> {
    const h = seg(ExplorerClient.hash(hash, 'explorer #13: transaction hash'));
    return this.list('explorer #13', `/v1/transactions/${h}/internal-transactions`, { ...q }, acct, this.config.network === 'testnet' ? 'alt' : 'main');
  }

  /** #14 GET /v1/contracts/{address}/abi: the ABI items of a verified contract. */
  async contractAbi(address: string, acct: Accounting): Promise<unknown[]> {
    const a = seg(ExplorerClient.address(address, 'explorer #14: contract address'));
    const r = await this.record('explorer #14', `/v1/contracts/${a}/abi`, {}, acct);
    if (!Array.isArray(r.data)) throw new ShapeError('explorer #14', `/v1/contracts/${a}/abi`, 'results.data is not a list of ABI items');
    return r.data;
  }

  /** #15 GET /v1/contracts/{address}/code: the code record of a verified contract. */
  async contractCode(address: string, acct: Accounting): Promise<ApiEntry> {
    const a = seg(ExplorerClient.address(address, 'explorer #15: contract address'));
    return (await this.record('explorer #15', `/v1/contracts/${a}/code`, {}, acct)).data;
  }

  /** #16 POST /v1/contracts/{address}/verify: true when the API verified the source (results 1). */
  async verifyContract(address: string, req: VerifyRequest, acct: Accounting): Promise<boolean> {
    const a = seg(ExplorerClient.address(address, 'explorer #16: contract address'));
    need(typeof req.source === 'string' && req.source.length > 0, 'explorer #16: the contract source must be non-empty text');
    need(Number.isInteger(req.runsOptimizer) && req.runsOptimizer >= 0, `explorer #16: runsOptimizer must be a non-negative integer, got ${req.runsOptimizer}`);
    const body = {
      contract_name: req.contractName,
      compiler: req.compiler,
      runs_optimizer: req.runsOptimizer,
      optimization_enabled: req.optimizationEnabled ? 1 : 0,
      contract_source: Buffer.from(req.source, 'utf8').toString('base64'),
      constructor_arguments: req.constructorArguments ?? '',
      libraries: req.libraries ?? [],
    };
    const r = await this.post('explorer #16', `/v1/contracts/${a}/verify`, body, acct);
    if (r === 1 || r === '1') return true;
    if (r === 0 || r === '0') return false;
    throw new ShapeError('explorer #16', `/v1/contracts/${a}/verify`, `results is ${JSON.stringify(r)?.slice(0, 60)}, expected 0 or 1`);
  }

  /** #17 GET /v1/blocks/{number}. */
  async block(number: number | 'latest', acct: Accounting): Promise<ApiEntry> {
    need(
      number === 'latest' || (Number.isSafeInteger(number) && number >= 0),
      `explorer #17: block number must be a non-negative integer or 'latest', got ${number}`,
    );
    return (await this.record('explorer #17', `/v1/blocks/${number}`, {}, acct)).data;
  }

  /** #18 GET /v1/event-logs: logs of a contract filtered by topics and blocks. */
  async eventLogs(q: EventLogsQuery, acct: Accounting): Promise<ListResults> {
    ExplorerClient.address(q.address, 'explorer #18: address');
    need(q.topic0 === undefined || (typeof q.topic0 === 'string' && q.topic0 !== ''), 'explorer #18: topic0, when given, must not be empty');
    return this.list(
      'explorer #18',
      '/v1/event-logs',
      {
        address: q.address,
        topic_0: q.topic0,
        topic_1: q.topic1,
        topic_2: q.topic2,
        topic_3: q.topic3,
        limit: q.limit,
        offset: q.offset,
        start_block: q.startBlock,
        end_block: q.endBlock,
        type: q.type,
        operand: q.operand,
      },
      acct,
    );
  }

  /** #19 GET /v1/tokens/{contract}/total-supply. */
  async tokenTotalSupply(contract: string, acct: Accounting): Promise<string> {
    const c = seg(ExplorerClient.address(contract, 'explorer #19: token address'));
    const d = (await this.record('explorer #19', `/v1/tokens/${c}/total-supply`, {}, acct)).data;
    if (typeof d.total_supply !== 'string') throw new ShapeError('explorer #19', `/v1/tokens/${c}/total-supply`, 'results.data.total_supply is not a string');
    return d.total_supply;
  }

  /** #20 GET /v1/tokens/{contract}/balance/{holder}. */
  async tokenBalance(contract: string, holder: string, acct: Accounting): Promise<string> {
    const c = seg(ExplorerClient.address(contract, 'explorer #20: token address'));
    const h = seg(ExplorerClient.address(holder, 'explorer #20: holder address'));
    const d = (await this.record('explorer #20', `/v1/tokens/${c}/balance/${h}`, {}, acct)).data;
    if (typeof d.balance !== 'string') throw new ShapeError('explorer #20', `/v1/tokens/${c}/balance/${h}`, 'results.data.balance is not a string');
    return d.balance;
  }

  /** #21 GET /v1/tokens/{contract}/inventory[/{holder}]: token ids of a contract, optionally of one holder. */
  async tokenInventory(contract: string, holder: string | undefined, q: Paging, acct: Accounting): Promise<ListResults> {
    const c = seg(ExplorerClient.address(contract, 'explorer #21: token address'));
    const h = holder === undefined ? '' : `/${seg(ExplorerClient.address(holder, 'explorer #21: holder address'))}`;
    return this.list('explorer #21', `/v1/tokens/${c}/inventory${h}`, { ...q }, acct);
  }

  /** #22 GET /v1/erc-721/{address}/tokens: the ERC-721 tokens an address holds. */
  async erc721Holdings(address: string, q: Paging, acct: Accounting): Promise<ListResults> {
    const a = seg(ExplorerClient.address(address, 'explorer #22: address'));
    return this.list('explorer #22', `/v1/erc-721/${a}/tokens`, { ...q }, acct);
  }

  /** #23 GET /v1/erc-721/{contract}/inventory. */
  async erc721Inventory(contract: string, q: Paging, acct: Accounting): Promise<ListResults> {
    const c = seg(ExplorerClient.address(contract, 'explorer #23: contract address'));
    return this.list('explorer #23', `/v1/erc-721/${c}/inventory`, { ...q }, acct);
  }

  /** #24 GET /v1/erc-721/{address}/contracts: contracts in which the address holds a non-zero balance. */
  async erc721Contracts(address: string, q: Paging, acct: Accounting): Promise<ListResults> {
    const a = seg(ExplorerClient.address(address, 'explorer #24: address'));
    return this.list('explorer #24', `/v1/erc-721/${a}/contracts`, { ...q }, acct);
  }

  /** #25 GET /v1/erc-721/{address}/token-transfer: `startBlock` is required by the API. */
  async erc721TokenTransfers(address: string, q: Paging & { startBlock: number; endBlock?: number }, acct: Accounting): Promise<ListResults> {
    const a = seg(ExplorerClient.address(address, 'explorer #25: address'));
    need(Number.isSafeInteger(q.startBlock) && q.startBlock >= 0, `explorer #25: startBlock is required and must be a block number, got ${q.startBlock}`);
    return this.list('explorer #25', `/v1/erc-721/${a}/token-transfer`, { ...q }, acct);
  }
}
