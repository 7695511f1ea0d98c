// Explorer endpoints beyond the transaction listing: internal transactions, token transfers and holdings,
// mined blocks, transaction status, contracts, event logs, tokens and the ERC-721 group.

import {
  A_ERC20_0,
  A_ERC721_0,
  A_ZERO,
  BYZANTIUM_BLOCK,
  Chain,
  Csr,
  ERC20_META,
  F_FAILED,
  L_DEPOSIT,
  L_ERC20,
  L_ERC721,
  L_SWAP,
  L_UNNAMED,
  N_ERC20,
  N_ERC721,
} from './chain.js';
import { VerifiedRecord, abiOf, contractCode, contractKind, verifiedRecord } from './contracts.js';
import type { ExplorerCtx, Results } from './handler.js';
import { gweiToWei, isHash, isoSeconds, pad64, word8 } from './hex.js';
import { closePage, nextRow, openPage } from './page.js';
import { ApiError, blockRange, checkWindow, parseBlockParam, parseBool, parseEnum, parseLimit, parseOffset, requireAddress, requireHash } from './params.js';
import { MINING_REWARD_GWEI, caseStyle, tokenAmount, tokenIdString, tokenUri, txMessage } from './render.js';
import { writeInternal } from './render-internal.js';
import { logShapes, tokenMeta, topic0Of, writeLog, writeNftTransfer, writeTransfer } from './render-logs.js';
import { hash2, hash3 } from './rng.js';
import { extraLog, extraLogs } from './token-events.js';
import { writeIso } from './render.js';
import type { ByteOut } from './bytes.js';
import { erc20Holdings, isErc20, isErc721, nativeBalance, nftHoldings, nftOwners, totalSupplyUnits } from './state.js';

type Json = Record<string, unknown>;

function list(count: number, data: unknown[], extra: Json = {}): Results {
  return { results: JSON.stringify({ count: String(count), ...extra, data }), rows: data.length };
}

function pageDesc(lo: number, hi: number, offset: number, limit: number): [number, number] {
  const top = hi - offset;
  return top <= lo ? [0, 0] : [Math.max(lo, top - limit), top];
}

function addr(c: Chain, raw: string | undefined, name: string): number {
  return c.findAddress(requireAddress(raw, name));
}

/** limit/offset with the result-window check. */
function paging(ctx: ExplorerCtx): { limit: number; offset: number } {
  const limit = parseLimit(ctx.query),
    offset = parseOffset(ctx.query);
  checkWindow(offset, limit, ctx.resultWindow);
  return { limit, offset };
}

/** Newest-first page of a CSR list within a block range; returns the rows and the total. */
function csrPage(
  c: Chain,
  csr: Csr,
  a: number,
  blockOf: (r: number) => number,
  from: number,
  to: number,
  offset: number,
  limit: number,
): { rows: number[]; count: number } {
  if (a < 0) return { rows: [], count: 0 };
  const [lo, hi] = c.range(csr, a, blockOf, from, to);
  const [p0, p1] = pageDesc(lo, hi, offset, limit);
  const rows: number[] = [];
  for (let i = p1 - 1; i >= p0; i--) rows.push(csr.ids[i]!);
  return { rows, count: hi - lo };
}

function slicePage<T>(items: T[], offset: number, limit: number): T[] {
  return items.slice(offset, offset + limit);
}

const ts = (c: Chain, b: number): string => isoSeconds(c.blockSeconds(b));

// ---- #1 balances -------------------------------------------------------------------------------------

function balances(ctx: ExplorerCtx): Results {
  const body = ctx.body as { addresses?: unknown } | null;
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new ApiError(400, "Request body must be a JSON object with 'addresses'");
  const list_ = body.addresses;
  if (!Array.isArray(list_)) throw new ApiError(400, "Missing required field 'addresses' (an array of 1 to 20 addresses)");
  if (list_.length < 1 || list_.length > 20) throw new ApiError(400, `'addresses' must hold 1 to 20 addresses, got ${list_.length}`);
  const data = list_.map((v, i) => {
    if (typeof v !== 'string') throw new ApiError(400, `addresses[${i}] must be a string`);
    requireAddress(v, `addresses[${i}]`);
    const a = ctx.chain.findAddress(v);
    return { address: v, balance: nativeBalance(ctx.chain, a, ctx.head).toString() };
  });
  return { results: JSON.stringify({ data }), rows: data.length };
}

// ---- #3, #13 internal transactions ----------------------------------------------------------------------

function accountInternal(ctx: ExplorerCtx): Results {
  const { chain: c, query: q, head } = ctx;
  const a = addr(c, ctx.params[0], 'address_hash');
  const { limit, offset } = paging(ctx);
  const withInput = parseBool(q, 'input');
  const { from, to } = blockRange(parseBlockParam(q, 'startBlock', head), parseBlockParam(q, 'endBlock', head, { allowLatest: true }), head, ctx.indexed);
  const { rows, count } = csrPage(c, c.idxItx, a, (r) => c.txBlk[c.itxParent[r]!]!, from, to, offset, limit);
  const out = openPage(count);
  for (let i = 0; i < rows.length; i++) {
    nextRow(out, i);
    writeInternal(out, c, rows[i]!, withInput);
  }
  return closePage(rows.length);
}

function visibleTx(ctx: ExplorerCtx, raw: string | undefined): number {
  const h = requireHash(raw, 'transaction_hash');
  const t = ctx.chain.findTx(h);
  if (t < 0 || ctx.chain.txBlk[t]! > ctx.head) throw new ApiError(404, `Transaction ${h} not found`);
  return t;
}

function txInternal(ctx: ExplorerCtx): Results {
  const c = ctx.chain;
  const limit = parseLimit(ctx.query);
  const withInput = parseBool(ctx.query, 'input');
  if (ctx.query.has('offset')) throw new ApiError(400, "Parameter 'offset' is not supported by this endpoint");
  const t = visibleTx(ctx, ctx.params[0]);
  const [r0, r1] = c.itxOfTx(t);
  const n = Math.min(limit, r1 - r0);
  const out = openPage(r1 - r0);
  for (let i = 0; i < n; i++) {
    nextRow(out, i);
    writeInternal(out, c, r0 + i, withInput);
  }
  return closePage(n);
}

// ---- #4, #5, #25 token transfers ----------------------------------------------------------------------

function transfers(kind: 'erc20' | 'erc721') {
  return (ctx: ExplorerCtx): Results => {
    const { chain: c, query: q, head } = ctx;
    const a = addr(c, ctx.params[0], 'address_hash');
    const { limit, offset } = paging(ctx);
    const { from, to } = blockRange(parseBlockParam(q, 'startBlock', head), parseBlockParam(q, 'endBlock', head, { allowLatest: true }), head, ctx.indexed);
    const csr = kind === 'erc20' ? c.idxErc20 : c.idxErc721;
    const { rows, count } = csrPage(c, csr, a, (r) => c.txBlk[c.logTx[r]!]!, from, to, offset, limit);
    const out = openPage(count);
    for (let i = 0; i < rows.length; i++) {
      nextRow(out, i);
      writeTransfer(out, c, rows[i]!, head, kind === 'erc20');
    }
    return closePage(rows.length);
  };
}

function erc721GroupTransfers(ctx: ExplorerCtx): Results {
  const { chain: c, query: q, head } = ctx;
  const a = addr(c, ctx.params[0], 'address_hash');
  const { limit, offset } = paging(ctx);
  const start = parseBlockParam(q, 'startBlock', head, { required: true });
  const { from, to } = blockRange(start, parseBlockParam(q, 'endBlock', head, { allowLatest: true }), head, ctx.indexed);
  const { rows, count } = csrPage(c, c.idxErc721, a, (r) => c.txBlk[c.logTx[r]!]!, from, to, offset, limit);
  const out = openPage(count);
  for (let i = 0; i < rows.length; i++) {
    nextRow(out, i);
    writeNftTransfer(out, c, rows[i]!, head);
  }
  return closePage(rows.length);
}

// ---- #6-#9, #22-#24 holdings ----------------------------------------------------------------------------

function erc20List(c: Chain, a: number, head: number): [number, number][] {
  if (a < 0) return [];
  return [...erc20Holdings(c, a, head)].sort((x, y) => x[0] - y[0]);
}
function nftCounts(c: Chain, a: number, head: number): [number, number][] {
  if (a < 0) return [];
  const m = new Map<number, number>();
  for (const n of nftHoldings(c, a, head)) m.set(n.contract, (m.get(n.contract) ?? 0) + 1);
  return [...m].sort((x, y) => x[0] - y[0]);
}

function accountTokens(ctx: ExplorerCtx): Results {
  const { chain: c, head } = ctx;
  const a = addr(c, ctx.params[0], 'address_hash');
  const { limit, offset } = paging(ctx);
  const st = caseStyle(c.kAddr ^ 0x06, a < 0 ? 0 : a);
  const holder = c.isContract(a) ? 'contract' : 'eoa';
  const e20 = erc20List(c, a, head),
    e721 = nftCounts(c, a, head);
  const r20 = slicePage(e20, offset, limit).map(([tk, units]) => ({
    balance: tokenAmount(tk, units),
    token_address: c.addrCase(A_ERC20_0 + tk, st),
    holder_address: c.addrCase(a, st),
    holder_type: holder,
    token_decimals: tokenMeta(A_ERC20_0 + tk).decimals,
  }));
  const r721 = slicePage(e721, offset, limit).map(([nft, n]) => ({
    balance: String(n),
    token_address: c.addrCase(A_ERC721_0 + nft, st),
    holder_address: c.addrCase(a, st),
  }));
  return {
    results: JSON.stringify({ erc_20: { count: String(e20.length), results: r20 }, erc_721: { count: String(e721.length), results: r721 } }),
    rows: r20.length + r721.length,
  };
}

function tokenRef(c: Chain, contract: number, st: number): Json {
  const m = tokenMeta(contract);
  return { token_address: c.addrCase(contract, st), token_name: m.name, token_symbol: m.symbol };
}

function accountTokenList(kind: 'erc20' | 'erc721') {
  return (ctx: ExplorerCtx): Results => {
    const { chain: c, head } = ctx;
    const a = addr(c, ctx.params[0], 'address_hash');
    const { limit, offset } = paging(ctx);
    const st = caseStyle(c.kAddr ^ 0x07, a < 0 ? 0 : a);
    const items = kind === 'erc20' ? erc20List(c, a, head).map(([tk]) => A_ERC20_0 + tk) : nftCounts(c, a, head).map(([n]) => A_ERC721_0 + n);
    return list(
      items.length,
      slicePage(items, offset, limit).map((ct) => tokenRef(c, ct, st)),
    );
  };
}

function accountInventory(ctx: ExplorerCtx): Results {
  const { chain: c, head } = ctx;
  const a = addr(c, ctx.params[0], 'address_hash');
  let only = -2;
  if (ctx.params[1] !== undefined) only = addr(c, ctx.params[1], 'token_address');
  const { limit, offset } = paging(ctx);
  const st = caseStyle(c.kAddr ^ 0x09, a < 0 ? 0 : a);
  let items = a < 0 ? [] : nftHoldings(c, a, head);
  if (only !== -2) items = items.filter((n) => A_ERC721_0 + n.contract === only);
  const data = slicePage(items, offset, limit).map((n) => {
    const m = tokenMeta(A_ERC721_0 + n.contract);
    return {
      contract_address: c.addrCase(A_ERC721_0 + n.contract, st),
      token_id: tokenIdString(c, n.contract, n.idx),
      token_uri: tokenUri(c, n.contract, n.idx),
      token_name: m.name,
      token_symbol: m.symbol,
    };
  });
  return list(items.length, data);
}

function erc721Tokens(ctx: ExplorerCtx): Results {
  const { chain: c, head } = ctx;
  const a = addr(c, ctx.params[0], 'address_hash');
  const { limit, offset } = paging(ctx);
  const st = caseStyle(c.kAddr ^ 0x22, a < 0 ? 0 : a);
  const items = a < 0 ? [] : nftHoldings(c, a, head);
  const data = slicePage(items, offset, limit).map((n) => {
    const m = tokenMeta(A_ERC721_0 + n.contract);
    return {
      owner: c.addrCase(a, st),
      contract_address: c.addrCase(A_ERC721_0 + n.contract, st),
      token_id: tokenIdString(c, n.contract, n.idx),
      token_uri: tokenUri(c, n.contract, n.idx),
      token_name: m.name,
      token_symbol: m.symbol,
      token_decimals: m.decimals,
    };
  });
  return list(items.length, data);
}

function erc721Contracts(ctx: ExplorerCtx): Results {
  return accountTokenList('erc721')(ctx);
}

/** Inventory of an NFT contract (#21, #23): token_name/token_symbol sit in results. */
function contractInventory(holderParam: boolean) {
  return (ctx: ExplorerCtx): Results => {
    const { chain: c, head } = ctx;
    const ct = addr(c, ctx.params[0], 'contract_address');
    const holder = holderParam ? addr(c, ctx.params[1], 'holder_address') : -2;
    const { limit, offset } = paging(ctx);
    const m = tokenMeta(ct);
    const nft = ct - A_ERC721_0;
    const items: number[] = [];
    if (isErc721(ct) && holder !== -1) {
      const owners = nftOwners(c, nft, head);
      for (let i = 0; i < owners.length; i++) if (owners[i] !== A_ZERO && (holder === -2 || owners[i] === holder)) items.push(i);
    }
    const data = slicePage(items, offset, limit).map((i) => {
      const owner = nftOwners(c, nft, head)[i]!;
      return { holder_address: c.addrCase(owner, caseStyle(c.kAddr ^ 0x21, i)), token_id: tokenIdString(c, nft, i), token_uri: tokenUri(c, nft, i) };
    });
    return { results: JSON.stringify({ count: String(items.length), token_name: m.name, token_symbol: m.symbol, data }), rows: data.length };
  };
}

// ---- #10 mined blocks ------------------------------------------------------------------------------------

export function blockRecord(c: Chain, b: number, style: number): Json {
  const fees = c.blockFeeGwei[b]!;
  return {
    timestamp: ts(c, b),
    miner: c.addrCase(2 + c.minerOf[b]!, style),
    reward: gweiToWei(MINING_REWARD_GWEI + fees),
    fees: gweiToWei(fees),
    block_number: String(b),
    mining_reward: gweiToWei(MINING_REWARD_GWEI),
  };
}

function minedBlocks(ctx: ExplorerCtx): Results {
  const { chain: c, query: q, head } = ctx;
  const a = addr(c, ctx.params[0], 'address_hash');
  const { limit, offset } = paging(ctx);
  const { from, to } = blockRange(parseBlockParam(q, 'startBlock', head), parseBlockParam(q, 'endBlock', head, { allowLatest: true }), head);
  const { rows, count } = csrPage(c, c.idxMined, a, (b) => b, from, to, offset, limit);
  return list(
    count,
    rows.map((b) => blockRecord(c, b, caseStyle(c.kBlock, b))),
  );
}

// ---- #11, #12 transaction status ----------------------------------------------------------------------

function txStatus(ctx: ExplorerCtx): Results {
  const t = visibleTx(ctx, ctx.params[0]);
  const c = ctx.chain,
    kb = c.txKind[t]!;
  c.gasOf(t, kb, c.txBlk[t]!);
  const failed = (kb & F_FAILED) !== 0;
  return { results: JSON.stringify({ data: { status: failed ? '0' : '1', description: failed ? txMessage(c, t, kb) : null } }), rows: 1 };
}

function receiptStatus(ctx: ExplorerCtx): Results {
  const t = visibleTx(ctx, ctx.params[0]);
  return { results: JSON.stringify({ data: { status: ctx.chain.txBlk[t]! < BYZANTIUM_BLOCK ? '0' : '1' } }), rows: 1 };
}

// ---- #14-#16 contracts ---------------------------------------------------------------------------------

function verifiedContract(ctx: ExplorerCtx): { i: number; rec: VerifiedRecord } {
  const c = ctx.chain;
  const raw = requireAddress(ctx.params[0], 'contract_address');
  const i = c.findAddress(raw);
  const deployed =
    i >= 0 &&
    c.isContract(i) &&
    (() => {
      const t = c.creationTx(i);
      return t !== 0xffffffff && c.txBlk[t]! <= ctx.head;
    })();
  if (!deployed) throw new ApiError(404, `Contract source code not verified: ${raw} is not a contract`);
  const rec = verifiedRecord(c, i, ctx.state.verified);
  if (!rec) throw new ApiError(404, `Contract source code not verified: ${raw}`);
  return { i, rec };
}

function contractAbi(ctx: ExplorerCtx): Results {
  const { i } = verifiedContract(ctx);
  const abi = abiOf(i);
  return { results: JSON.stringify({ data: abi }), rows: abi.length };
}

function contractCodeRecord(ctx: ExplorerCtx): Results {
  const { i, rec } = verifiedContract(ctx);
  const c = ctx.chain;
  const data = {
    address: c.addrCase(i, 1),
    logo:
      contractKind(i) === 'erc20' && ERC20_META[i - A_ERC20_0]!.symbol
        ? `https://assets.example.org/logos/${ERC20_META[i - A_ERC20_0]!.symbol!.toLowerCase()}.png`
        : null,
    compiler: rec.compiler,
    libraries: rec.libraries,
    verify_date: rec.verify_date,
    contract_name: rec.contract_name,
    runs_optimizer: rec.runs_optimizer,
    optimization_enabled: rec.optimization_enabled,
    contract_code: contractCode(c, i),
    contract_abi: abiOf(i),
    contract_source: rec.contract_source,
    constructor_arguments: rec.constructor_arguments,
    'swarm source': 'bzzr://' + pad64(word8(hash2(c.kAddr, i)) + word8(hash3(c.kAddr, i, 7))),
    verify_status: '1',
    verify_message: 'Pass - Verified',
  };
  return { results: JSON.stringify({ data }), rows: 1 };
}

function verify(ctx: ExplorerCtx): Results {
  const c = ctx.chain;
  const raw = requireAddress(ctx.params[0], 'contract_address');
  const b = ctx.body as Record<string, unknown> | null;
  if (b === null || typeof b !== 'object' || Array.isArray(b)) throw new ApiError(400, 'Request body must be a JSON object');
  const str = (k: string, required: boolean): string | undefined => {
    const v = b[k];
    if (v === undefined || v === null) {
      if (required) throw new ApiError(400, `Missing required field '${k}'`);
      return undefined;
    }
    if (typeof v !== 'string') throw new ApiError(400, `Field '${k}' must be a string`);
    return v;
  };
  const int = (k: string): number | undefined => {
    const v = b[k];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) throw new ApiError(400, `Field '${k}' must be a non-negative integer`);
    return v;
  };
  const name = str('contract_name', true)!,
    compiler = str('compiler', true)!,
    source = str('contract_source', true)!;
  const runs = int('runs_optimizer'),
    opt = int('optimization_enabled');
  const ctorArgs = str('constructor_arguments', false) ?? '';
  const libs = b['libraries'];
  if (libs !== undefined && libs !== null && !Array.isArray(libs)) throw new ApiError(400, "Field 'libraries' must be an array");
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(source) || source.length % 4 !== 0) throw new ApiError(400, "Field 'contract_source' must be base64");
  const i = c.findAddress(raw);
  const decoded = Buffer.from(source, 'base64').toString('utf8');
  const ok = i >= 0 && c.isContract(i) && source.length > 0 && decoded.includes('contract ' + name);
  if (ok && !verifiedRecord(c, i, ctx.state.verified)) {
    ctx.state.verified.set(c.addrLower(i), {
      contract_name: name,
      compiler,
      runs_optimizer: String(runs ?? 200),
      optimization_enabled: String(opt ?? 1),
      contract_source: source,
      constructor_arguments: ctorArgs,
      libraries: JSON.stringify(libs ?? []),
      verify_date: isoSeconds(c.blockSeconds(ctx.head)),
    });
  }
  // Why it failed, as an explorer says it: the message is the only place a refused submission learns why.
  const reason =
    i < 0 || !c.isContract(i) ? `Fail - Unable to verify: ${raw} is not a contract` : `Fail - Unable to verify: the source does not declare contract ${name}`;
  return ok ? { results: '"1"', rows: 0 } : { results: '"0"', rows: 0, message: reason };
}

// ---- #18 event logs --------------------------------------------------------------------------------------

/** Topic n (0..3) of log r, or null; topic_0 is the event's signature hash. */
function topicOf(c: Chain, r: number, n: number): string | null {
  const k = c.logKind[r]!;
  if (n === 0) return topic0Of(c, k, c.logContract[r]!);
  switch (k) {
    case L_ERC20:
    case L_SWAP:
      return n === 1 ? addrTopic(c, c.logFrom[r]!) : n === 2 ? addrTopic(c, c.logTo[r]!) : null;
    case L_ERC721:
      return n === 1
        ? addrTopic(c, c.logFrom[r]!)
        : n === 2
          ? addrTopic(c, c.logTo[r]!)
          : '0x' + pad64(BigInt(tokenIdString(c, c.logContract[r]! - A_ERC721_0, c.logAmt[r]!)).toString(16));
    case L_DEPOSIT:
      return n === 1 ? addrTopic(c, c.logFrom[r]!) : n === 2 ? '0x' + pad64(String(c.logAmt[r]!)) : null;
    default:
      return null;
  }
}
const addrTopic = (c: Chain, i: number): string => '0x' + pad64(c.addrLower(i).slice(2));

const logCache = new Map<string, Uint32Array>();

/** An event-logs request, checked: whose logs, which topics must match and how, which blocks, which page. */
interface EventLogQuery {
  address: string;
  /** topic_0 to topic_3, lower case; null where not given. */
  topics: (string | null)[];
  real: boolean;
  limit: number;
  offset: number;
  from: number;
  to: number;
  type: 'single' | 'combine';
  operand: 'and' | 'or';
}

function eventLogs(ctx: ExplorerCtx): Results {
  const c = ctx.chain;
  const query = eventLogQuery(ctx);
  const ids = matchingLogs(c, query);
  const [p0, p1] = pageDesc(0, ids.length, query.offset, query.limit);
  const out = openPage(ids.length),
    shapes = logShapes(c);
  for (let i = p1 - 1; i >= p0; i--) {
    nextRow(out, p1 - 1 - i);
    const id = ids[i]!;
    if (id >= EXTRA) writeExtraLog(out, c, id - EXTRA, query.real);
    else writeLog(out, c, id, shapes, query.real);
  }
  return closePage(p1 - p0);
}

/** The request's parameters, checked in the order the errors are reported. */
function eventLogQuery(ctx: ExplorerCtx): EventLogQuery {
  const { query: q, head } = ctx;
  const address = q.get('address');
  if (address === null || address === '') throw new ApiError(400, "Missing required parameter 'address'");
  requireAddress(address, 'address');
  const topics: (string | null)[] = [0, 1, 2, 3].map((n) => {
    const v = q.get('topic_' + n);
    if (v === null || v === '') return null;
    if (!isHash(v)) throw new ApiError(400, `Invalid topic_${n} '${v.slice(0, 80)}': expected a 0x-prefixed 32-byte hex value`);
    return v.toLowerCase();
  });
  // The real service lists a contract's logs by address alone; the spec requires topic_0.
  const real = ctx.dialect === 'real';
  if (topics[0] === null && !real) throw new ApiError(400, "Missing required parameter 'topic_0'");
  const { limit, offset } = paging(ctx);
  const start = parseBlockParam(q, 'start_block', head),
    end = parseBlockParam(q, 'end_block', head, { allowLatest: true });
  const { from, to } = blockRange(start, end, head, ctx.indexed);
  const hasMore = topics.slice(1).some((t) => t !== null);
  const type = parseEnum(q, 'type', ['single', 'combine'] as const, hasMore ? 'combine' : 'single');
  const operand = parseEnum(q, 'operand', ['and', 'or'] as const, 'and');
  return { address, topics, real, limit, offset, from, to, type, operand };
}

/** Ids of the contract's matching logs in block order, chain logs and extra logs (EXTRA + k); cached per query. */
function matchingLogs(c: Chain, query: EventLogQuery): Uint32Array {
  const { from, to, topics, type, operand } = query;
  const ct = c.findAddress(query.address);
  if (ct < 0) return new Uint32Array(0);
  const key = `${c.uid}:${ct}:${from}:${to}:${topics.join(',')}:${type}:${operand}`;
  const hit = logCache.get(key);
  if (hit) return hit;
  const others = type === 'single' ? [] : [1, 2, 3].filter((n) => topics[n] !== null);
  const ids = Uint32Array.from(withExtraLogs(c, ct, chainLogsMatching(c, ct, query, others), from, to, topics, others, operand));
  if (logCache.size > 64) logCache.delete(logCache.keys().next().value as string);
  logCache.set(key, ids);
  return ids;
}

/**
 * The chain's logs of contract ct in the query's blocks whose topics match: topic_0 always has to; with
 * type=combine the `others` given combine with `operand`.
 */
function chainLogsMatching(c: Chain, ct: number, query: EventLogQuery, others: readonly number[]): number[] {
  const { topics, operand } = query;
  const [lo, hi] = c.range(c.idxLogs, ct, (r) => c.txBlk[c.logTx[r]!]!, query.from, query.to);
  const out: number[] = [];
  // All logs listed here are of contract ct, whose topic_0 depends only on the log's kind: compared once per kind.
  const kindMatches = [L_ERC20, L_ERC721, L_SWAP, L_DEPOSIT, L_UNNAMED].map((k) => topics[0] === null || topic0Of(c, k, ct) === topics[0]);
  for (let i = lo; i < hi; i++) {
    const r = c.idxLogs.ids[i]!;
    if (!kindMatches[c.logKind[r]!]) continue;
    if (othersMatch((n) => topicOf(c, r, n), topics, others, operand)) out.push(r);
  }
  return out;
}

/** Whether a log's topics `others` (topic_1..3, read by `topicAt`) match the query's, combined by `operand`. */
function othersMatch(topicAt: (n: number) => string | null, topics: readonly (string | null)[], others: readonly number[], operand: 'and' | 'or'): boolean {
  for (const n of others) {
    const m = topicAt(n) === topics[n];
    if (operand === 'and' && !m) return false;
    if (operand === 'or' && m) return true;
  }
  return others.length === 0 || operand === 'and';
}

/** Ids at and above this are extra logs (src/simulator/token-events.ts), below it the chain's logs. */
const EXTRA = 0x80000000;

/** The chain's matching logs of contract ct merged, in block order, with its matching extra logs. */
function withExtraLogs(
  c: Chain,
  ct: number,
  chainIds: number[],
  from: number,
  to: number,
  topics: (string | null)[],
  others: number[],
  operand: 'and' | 'or',
): number[] {
  const x = extraLogs(c);
  const mine = x.byContract.get(ct);
  if (!mine) return chainIds;
  const extra: number[] = [];
  for (const k of mine) {
    if (x.block[k]! < from || x.block[k]! > to) continue;
    const t = extraLog(c, k).topics;
    if (t[0] !== topics[0]) continue;
    if (othersMatch((n) => t[n] ?? null, topics, others, operand)) extra.push(k);
  }
  if (extra.length === 0) return chainIds;
  // An extra log comes after every chain log of its block.
  const merged: number[] = [];
  let j = 0;
  for (const r of chainIds) {
    const b = c.txBlk[c.logTx[r]!]!;
    while (j < extra.length && x.block[extra[j]!]! < b) merged.push(EXTRA + extra[j++]!);
    merged.push(r);
  }
  while (j < extra.length) merged.push(EXTRA + extra[j++]!);
  return merged;
}

/** The event-log entry of extra log k (the key order of writeLog's entries). */
function writeExtraLog(out: ByteOut, c: Chain, k: number, withId = false): void {
  const l = extraLog(c, k);
  const b = l.block;
  // The real dialect's id (see writeLog): extra logs are numbered after the chain's own logs.
  out.str(withId ? `{"id":"${c.logTx.length + k + 1}","timestamp":` : '{"timestamp":');
  writeIso(out, c.blockSeconds(b));
  out.str(
    JSON.stringify({
      address: c.addrLower(l.contract),
      data: l.data,
      method: '0x' + word8(hash2(c.kVal ^ 0x3e7, l.contract)),
      transaction_hash: c.txHash(l.tx),
      log_name: l.name,
      log_abi: l.abi,
      address_type: 'contract',
      address_extra: null,
      transaction_index: String(l.tx - c.blockFirstTx[b]!),
      log_index: String(l.logIndex),
      topics_count: String(l.topics.length),
      topic_0: l.topics[0] ?? null,
      topic_1: l.topics[1] ?? null,
      topic_2: l.topics[2] ?? null,
      topic_3: l.topics[3] ?? null,
    }).replace(/^\{/, ','),
  );
}

// ---- #19, #20 tokens -------------------------------------------------------------------------------------

function tokenContract(ctx: ExplorerCtx): number {
  const raw = requireAddress(ctx.params[0], 'contract_address');
  const i = ctx.chain.findAddress(raw);
  const deployed =
    i >= 0 &&
    (isErc20(i) || isErc721(i)) &&
    (() => {
      const t = ctx.chain.creationTx(i);
      return t !== 0xffffffff && ctx.chain.txBlk[t]! <= ctx.head;
    })();
  if (!deployed) throw new ApiError(404, `Token ${raw} not found: not an ERC-20 or ERC-721 contract`);
  return i;
}

function totalSupply(ctx: ExplorerCtx): Results {
  const i = tokenContract(ctx);
  const units = totalSupplyUnits(ctx.chain, i, ctx.head);
  const v = isErc20(i) ? tokenAmount(i - A_ERC20_0, units) : String(units);
  return { results: JSON.stringify({ data: { total_supply: v } }), rows: 1 };
}

function tokenBalance(ctx: ExplorerCtx): Results {
  const i = tokenContract(ctx);
  const a = addr(ctx.chain, ctx.params[1], 'address_hash');
  let v = '0';
  if (a >= 0) {
    if (isErc20(i)) v = tokenAmount(i - A_ERC20_0, erc20Holdings(ctx.chain, a, ctx.head).get(i - A_ERC20_0) ?? 0);
    else v = String(nftHoldings(ctx.chain, a, ctx.head).filter((n) => A_ERC721_0 + n.contract === i).length);
  }
  return { results: JSON.stringify({ data: { balance: v } }), rows: 1 };
}

export const HANDLERS = {
  balances,
  accountInternal,
  txInternal,
  erc20Transfers: transfers('erc20'),
  erc721Transfers: transfers('erc721'),
  erc721GroupTransfers,
  accountTokens,
  accountErc20: accountTokenList('erc20'),
  accountErc721: accountTokenList('erc721'),
  accountInventory,
  erc721Tokens,
  erc721Contracts,
  contractInventory: contractInventory(false),
  contractInventoryHolder: contractInventory(true),
  minedBlocks,
  txStatus,
  receiptStatus,
  contractAbi,
  contractCodeRecord,
  verify,
  eventLogs,
  totalSupply,
  tokenBalance,
};

export { N_ERC20, N_ERC721, L_UNNAMED };
