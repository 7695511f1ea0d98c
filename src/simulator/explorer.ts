// Explorer API handlers. Each handler validates its request, reads the chain at the pinned head of this
// request, and returns the `results` JSON text plus the number of rows it served.

import { Chain, Csr } from './chain.js';
import type { ExplorerCtx, Handler, Results } from './handler.js';
import { HANDLERS } from './endpoints.js';
import { ApiError, blockRange, checkWindow, parseBlockParam, parseBool, parseEnum, parseLimit, parseOffset, requireAddress } from './params.js';
import { renderBlock, writeTx, writeTxSimple } from './render.js';
import { closePage, nextRow, openPage } from './page.js';

export type { ExplorerCtx, ExplorerState, Handler, Results } from './handler.js';

export interface Route {
  method: 'GET' | 'POST';
  pattern: string[];
  name: string;
  handler: Handler;
}

/** Positions of a newest-first page within [lo, hi) of a CSR list. */
export function pageDesc(lo: number, hi: number, offset: number, limit: number): [number, number] {
  const top = hi - offset; // exclusive
  const bottom = Math.max(lo, top - limit);
  return top <= lo ? [0, 0] : [bottom, top];
}

export function listResults(count: number, items: string[], extra = ''): Results {
  return { results: '{"count":"' + count + '"' + extra + ',"data":[' + items.join(',') + ']}', rows: items.length };
}

function addressIndex(c: Chain, raw: string | undefined, name: string): number {
  return c.findAddress(requireAddress(raw, name));
}

const EMPTY_CSR_RANGE: [number, number] = [0, 0];

function txTransactions(ctx: ExplorerCtx): Results {
  const { chain: c, query: q, head } = ctx;
  const a = addressIndex(c, ctx.params[0], 'address_hash');
  const limit = parseLimit(q),
    offset = parseOffset(q);
  const start = parseBlockParam(q, 'startBlock', head),
    end = parseBlockParam(q, 'endBlock', head, { allowLatest: true });
  const withInput = parseBool(q, 'input'),
    simple = parseBool(q, 'simple');
  const cond = parseEnum(q, 'condition', ['all', 'to', 'from', 'contract'] as const, 'all');
  checkWindow(offset, limit, ctx.resultWindow);
  const { from, to, toBlock } = blockRange(start, end, head, ctx.indexed);
  const csr: Csr = cond === 'all' ? c.idxAll : cond === 'from' ? c.idxFrom : cond === 'to' ? c.idxTo : c.idxCreate;
  const blk = c.txBlk;
  const [lo, hi] = a < 0 ? EMPTY_CSR_RANGE : c.range(csr, a, (t) => blk[t]!, from, to);
  const [p0, p1] = pageDesc(lo, hi, offset, limit);
  const out = openPage(hi - lo, simple ? ',"from_block":"' + from + '","to_block":"' + toBlock + '"' : '');
  for (let i = p1 - 1; i >= p0; i--) {
    nextRow(out, p1 - 1 - i);
    if (simple) writeTxSimple(out, c, csr.ids[i]!, withInput);
    else writeTx(out, c, csr.ids[i]!, head, withInput);
  }
  return closePage(p1 - p0);
}

function block(ctx: ExplorerCtx): Results {
  const raw = ctx.params[0]!;
  let b: number;
  if (raw.toLowerCase() === 'latest') b = ctx.head;
  else if (/^[0-9]{1,15}$/.test(raw)) b = Number(raw);
  else if (/^0x[0-9a-fA-F]{1,12}$/.test(raw)) b = parseInt(raw.slice(2), 16);
  else throw new ApiError(400, `Invalid block_number '${raw.slice(0, 80)}': expected a non-negative integer or 'latest'`);
  if (b > ctx.head) throw new ApiError(404, `Block ${b} not found: the latest block is ${ctx.head}`);
  return { results: '{"data":' + renderBlock(ctx.chain, b) + '}', rows: 1 };
}

const H = HANDLERS;
export const ROUTES: Route[] = [
  { method: 'POST', pattern: ['accounts', 'balance'], name: 'accounts/balance', handler: H.balances },
  { method: 'GET', pattern: ['accounts', ':', 'transactions'], name: 'accounts/transactions', handler: txTransactions },
  { method: 'GET', pattern: ['accounts', ':', 'internal-transactions'], name: 'accounts/internal-transactions', handler: H.accountInternal },
  { method: 'GET', pattern: ['accounts', ':', 'token-transfer', 'erc20'], name: 'accounts/token-transfer/erc20', handler: H.erc20Transfers },
  { method: 'GET', pattern: ['accounts', ':', 'token-transfer', 'erc721'], name: 'accounts/token-transfer/erc721', handler: H.erc721Transfers },
  { method: 'GET', pattern: ['accounts', ':', 'tokens'], name: 'accounts/tokens', handler: H.accountTokens },
  { method: 'GET', pattern: ['accounts', ':', 'tokens', 'erc20'], name: 'accounts/tokens/erc20', handler: H.accountErc20 },
  { method: 'GET', pattern: ['accounts', ':', 'tokens', 'erc721'], name: 'accounts/tokens/erc721', handler: H.accountErc721 },
  { method: 'GET', pattern: ['accounts', ':', 'tokens', 'inventory'], name: 'accounts/tokens/inventory', handler: H.accountInventory },
  { method: 'GET', pattern: ['accounts', ':', 'tokens', 'inventory', ':'], name: 'accounts/tokens/inventory', handler: H.accountInventory },
  { method: 'GET', pattern: ['accounts', ':', 'mined-blocks'], name: 'accounts/mined-blocks', handler: H.minedBlocks },
  { method: 'GET', pattern: ['transactions', ':', 'transaction-status'], name: 'transactions/transaction-status', handler: H.txStatus },
  { method: 'GET', pattern: ['transactions', ':', 'receipt-status'], name: 'transactions/receipt-status', handler: H.receiptStatus },
  { method: 'GET', pattern: ['transactions', ':', 'internal-transactions'], name: 'transactions/internal-transactions', handler: H.txInternal },
  { method: 'GET', pattern: ['contracts', ':', 'abi'], name: 'contracts/abi', handler: H.contractAbi },
  { method: 'GET', pattern: ['contracts', ':', 'code'], name: 'contracts/code', handler: H.contractCodeRecord },
  { method: 'POST', pattern: ['contracts', ':', 'verify'], name: 'contracts/verify', handler: H.verify },
  { method: 'GET', pattern: ['blocks', ':'], name: 'blocks', handler: block },
  { method: 'GET', pattern: ['event-logs'], name: 'event-logs', handler: H.eventLogs },
  { method: 'GET', pattern: ['tokens', ':', 'total-supply'], name: 'tokens/total-supply', handler: H.totalSupply },
  { method: 'GET', pattern: ['tokens', ':', 'balance', ':'], name: 'tokens/balance', handler: H.tokenBalance },
  { method: 'GET', pattern: ['tokens', ':', 'inventory'], name: 'tokens/inventory', handler: H.contractInventory },
  { method: 'GET', pattern: ['tokens', ':', 'inventory', ':'], name: 'tokens/inventory', handler: H.contractInventoryHolder },
  { method: 'GET', pattern: ['erc-721', ':', 'tokens'], name: 'erc-721/tokens', handler: H.erc721Tokens },
  { method: 'GET', pattern: ['erc-721', ':', 'inventory'], name: 'erc-721/inventory', handler: H.contractInventory },
  { method: 'GET', pattern: ['erc-721', ':', 'contracts'], name: 'erc-721/contracts', handler: H.erc721Contracts },
  { method: 'GET', pattern: ['erc-721', ':', 'token-transfer'], name: 'erc-721/token-transfer', handler: H.erc721GroupTransfers },
];

export function matchRoute(routes: Route[], segs: string[]): { route: Route; params: string[] }[] {
  const out: { route: Route; params: string[] }[] = [];
  for (const r of routes) {
    if (r.pattern.length !== segs.length) continue;
    const params: string[] = [];
    let ok = true;
    for (let i = 0; i < segs.length; i++) {
      const p = r.pattern[i]!;
      if (p === ':') params.push(segs[i]!);
      else if (p !== segs[i]) {
        ok = false;
        break;
      }
    }
    if (ok) out.push({ route: r, params });
  }
  return out;
}
