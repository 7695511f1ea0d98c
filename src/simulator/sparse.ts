// A chain of realistic height (the real testnet is about 53.45M blocks), with activity spread from genesis:
// sparse early, dense late, long empty stretches. Nothing is materialised: each scope's activity is a list of
// eras (1M blocks each), and an era's active blocks are an arithmetic progression, so a range's count and any
// page of it are computed from the eras alone. Deterministic from the seed. It serves the ERC-20 transfer
// listing of its own addresses (explorer #4) and the blocks endpoint (#17); everything else is the demo chain's.

import { hash2, hash3 } from './rng.js';
import { isoSeconds, word8 } from './hex.js';
import { ApiError } from './params.js';

export const SPARSE_HEAD = 53_450_000;
const ERA_BLOCKS = 1_000_000;
/** Block times of the tall chain: one second, so 53M blocks are about 1.7 years. */
const GENESIS = Date.UTC(2024, 2, 1) / 1000;

interface Era {
  from: number;
  to: number;
  /** First active block. */
  first: number;
  period: number;
  /** Transfers in each active block (1 to 3, so a page can end inside a block). */
  perBlock: number;
}

export type SparseProfile = 'dense' | 'sparse' | 'empty';
export const SPARSE_PROFILES: readonly SparseProfile[] = ['dense', 'sparse', 'empty'];

export interface SparseRow {
  block: number;
  index: number;
}

/** One scope of the tall chain: an address and its eras. */
class Scope {
  constructor(
    readonly address: string,
    readonly eras: Era[],
  ) {}

  private inEra(e: Era, from: number, to: number): { lo: number; hi: number } | undefined {
    const a = Math.max(from, e.first);
    const b = Math.min(to, e.to);
    if (a > b) return undefined;
    const lo = Math.ceil((a - e.first) / e.period);
    const hi = Math.floor((b - e.first) / e.period);
    return lo <= hi ? { lo, hi } : undefined;
  }

  count(from: number, to: number): number {
    let n = 0;
    for (const e of this.eras) {
      const r = this.inEra(e, from, to);
      if (r) n += (r.hi - r.lo + 1) * e.perBlock;
    }
    return n;
  }

  /** Rows of [from, to] newest first (block descending, then transaction index descending), from `offset`. */
  page(from: number, to: number, offset: number, limit: number): SparseRow[] {
    const out: SparseRow[] = [];
    let skip = offset;
    for (let k = this.eras.length - 1; k >= 0 && out.length < limit; k--) {
      const e = this.eras[k]!;
      const r = this.inEra(e, from, to);
      if (!r) continue;
      const n = (r.hi - r.lo + 1) * e.perBlock;
      if (skip >= n) {
        skip -= n;
        continue;
      }
      for (let i = skip; i < n && out.length < limit; i++) {
        const j = r.hi - Math.floor(i / e.perBlock);
        out.push({ block: e.first + j * e.period, index: e.perBlock - 1 - (i % e.perBlock) });
      }
      skip = 0;
    }
    return out;
  }
}

/** The tall chain of one network and seed. */
export class SparseChain {
  readonly head = SPARSE_HEAD;
  readonly scopes = new Map<string, Scope>();
  readonly addresses: Record<SparseProfile, string>;
  private readonly token: string;
  private readonly key: number;

  constructor(seed: number, network: 'mainnet' | 'testnet') {
    this.key = hash2(seed >>> 0, network === 'mainnet' ? 0x5a11 : 0x7e57);
    const address = (n: number): string => '0x' + [0, 1, 2, 3, 4].map((j) => word8(hash3(this.key, n, j))).join('');
    this.token = address(99);
    this.addresses = { dense: address(1), sparse: address(2), empty: address(3) };
    const eras = Math.ceil((SPARSE_HEAD + 1) / ERA_BLOCKS);
    const dense: Era[] = [];
    const sparse: Era[] = [];
    for (let e = 0; e < eras; e++) {
      const from = e * ERA_BLOCKS;
      const to = Math.min(SPARSE_HEAD, from + ERA_BLOCKS - 1);
      const h = hash2(this.key, e);
      // Dense: a quiet start (an active block every ~250k blocks), one era in five empty, then busier and
      // busier up to an active block every ~330 blocks in the last era.
      if (h % 5 !== 0 || e >= eras - 2) {
        const period = Math.max(300, Math.floor(250_000 / (1 + (e * e) / 4)) + (h % 37));
        dense.push({ from, to, first: from + ((h >>> 8) % period), period, perBlock: 1 + ((h >>> 4) % 3) });
      }
      // Sparse: a handful of transfers across the whole history, in eras far apart.
      if ((h >>> 12) % 11 === 0) sparse.push({ from, to, first: from + ((h >>> 3) % 500_000), period: 400_000 + (h % 100_000), perBlock: 1 });
    }
    this.scopes.set(this.addresses.dense, new Scope(this.addresses.dense, dense));
    this.scopes.set(this.addresses.sparse, new Scope(this.addresses.sparse, sparse));
    this.scopes.set(this.addresses.empty, new Scope(this.addresses.empty, []));
  }

  /** The scope of an address (any letter case), if the tall chain has it. */
  scope(address: string): Scope | undefined {
    return this.scopes.get(address.toLowerCase());
  }

  /** How many transfers of `address` lie in [from, to]. */
  count(address: string, from: number, to: number): number {
    return this.scope(address)?.count(from, to) ?? 0;
  }

  blockSeconds(b: number): number {
    return GENESIS + b;
  }

  blockHash(b: number): string {
    return '0x' + [0, 1, 2, 3, 4, 5, 6, 7].map((j) => word8(hash3(this.key ^ 0xb10c, b, j))).join('');
  }

  private txHash(scope: string, b: number, i: number): string {
    // Unique by construction (the block and index are words of it): 44k random 32-bit seeds would collide.
    const k = hash2(this.key ^ parseInt(scope.slice(2, 10), 16), b);
    return '0x' + word8(hash2(this.key, parseInt(scope.slice(2, 10), 16))) + [1, 2, 3, 4, 5].map((j) => word8(hash3(k, i, j))).join('') + word8(b) + word8(i);
  }

  /** A page of explorer #4 for an address of this chain, as the results object's JSON. */
  transfersPage(address: string, q: URLSearchParams, resultWindow: number): { body: string; rows: number } {
    const scope = this.scope(address)!;
    const int = (name: string, dflt: number | null): number | null => {
      const v = q.get(name);
      if (v === null || v === '') return dflt;
      if (!/^\d{1,15}$/.test(v)) throw new ApiError(400, `Invalid ${name} '${v.slice(0, 40)}': expected a non-negative integer`);
      return Number(v);
    };
    const limit = int('limit', 50)!;
    const offset = int('offset', 0)!;
    if (limit < 1 || limit > 1000) throw new ApiError(400, `Invalid limit ${limit}: must be between 1 and 1000`);
    if (offset + limit > resultWindow) throw new ApiError(400, `Result window is too large: offset + limit must be less than or equal to ${resultWindow}`);
    const from = int('startBlock', 0)!;
    const to = Math.min(int('endBlock', this.head) ?? this.head, this.head);
    if (from > to) return { body: '{"count":"0","data":[]}', rows: 0 };
    const count = scope.count(from, to);
    const rows = scope.page(from, to, offset, limit);
    const data = rows.map((r) => ({
      timestamp: isoSeconds(this.blockSeconds(r.block)),
      sender: r.index % 2 === 0 ? scope.address : this.token,
      receiver: r.index % 2 === 0 ? this.token : scope.address,
      value: String(1 + (hash3(this.key, r.block, r.index) % 1_000_000)) + '000000',
      confirmations: String(this.head - r.block),
      block_number: String(r.block),
      transaction_hash: this.txHash(scope.address, r.block, r.index),
      block_hash: this.blockHash(r.block),
      token_address: this.token,
      token_name: 'Tall Token',
      token_symbol: 'TALL',
      token_decimals: '6',
      transaction_index: String(r.index),
    }));
    return { body: JSON.stringify({ count: String(count), data }), rows: data.length };
  }
}

const cache = new Map<string, SparseChain>();
/** The tall chain of a seed and network (cheap: a few hundred eras). */
export function sparseChainFor(seed: number, network: 'mainnet' | 'testnet'): SparseChain {
  const key = `${network}:${seed}`;
  let c = cache.get(key);
  if (!c) cache.set(key, (c = new SparseChain(seed, network)));
  return c;
}
