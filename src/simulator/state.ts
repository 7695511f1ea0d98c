// State implied by the chain up to a head: native balances, token holdings, NFT ownership, supplies.
// Computed from the per-address and per-contract indexes (never from a chain scan) and cached per head.

import {
  A_ERC20_0,
  A_ERC721_0,
  A_ZERO,
  Chain,
  F_FAILED,
  G,
  F_MAXVALUE,
  K_CALL,
  K_CREATE,
  L_ERC20,
  L_ERC721,
  N_ERC20,
  N_ERC721,
  TRACE_TEMPLATES,
  WEIRD_TOKEN,
} from './chain.js';
import { hash2 } from './rng.js';
import { MINING_REWARD_GWEI } from './render.js';

class Lru<V> {
  private m = new Map<string, V>();
  constructor(private cap: number) {}
  get(k: string): V | undefined {
    const v = this.m.get(k);
    if (v !== undefined) {
      this.m.delete(k);
      this.m.set(k, v);
    }
    return v;
  }
  set(k: string, v: V): void {
    this.m.set(k, v);
    if (this.m.size > this.cap) this.m.delete(this.m.keys().next().value as string);
  }
}

const caches = new WeakMap<Chain, Lru<unknown>>();
function cached<V>(c: Chain, key: string, make: () => V): V {
  // Views of one shared chain (per-simulator heads) share the cache: keys always include the head.
  const root = Object.getPrototypeOf(c) instanceof Chain ? (Object.getPrototypeOf(c) as Chain) : c;
  let lru = caches.get(root);
  if (!lru) {
    lru = new Lru<unknown>(512);
    caches.set(root, lru);
  }
  let v = lru.get(key) as V | undefined;
  if (v === undefined) {
    v = make();
    lru.set(key, v);
  }
  return v;
}

export function isErc20(i: number): boolean {
  return i >= A_ERC20_0 && i < A_ERC20_0 + N_ERC20;
}
export function isErc721(i: number): boolean {
  return i >= A_ERC721_0 && i < A_ERC721_0 + N_ERC721;
}

/** Trace type of an internal transaction at template position pos. */
export function traceType(c: Chain, parent: number, tpl: number, pos: number): string {
  if (pos === 0) return 'call';
  if (tpl === 5 && pos === 2) return 'selfdestruct';
  const r = hash2(c.kVal ^ 0x7ace, parent * 8 + pos) % 10;
  return r < 5 ? 'call' : r < 7 ? 'delegatecall' : r < 9 ? 'staticcall' : 'codecall';
}
export function traceTemplate(c: Chain, t: number): number {
  return hash2(c.kVal ^ 0x77, t) % TRACE_TEMPLATES.length;
}

/** Value (gwei) moved by an internal transaction: the first call forwards the parent's value. */
export function itxValueGwei(c: Chain, r: number): number {
  if (c.itxPos[r] !== 0) return 0;
  const t = c.itxParent[r]!;
  return c.valueGwei(t, c.txKind[t]!);
}

/** Native balance in wei at head: genesis allocation + transfers + internal transfers - fees + block rewards. */
export function nativeBalance(c: Chain, a: number, head: number): bigint {
  if (a < 0) return 0n;
  return cached(c, `bal:${a}:${head}`, () => {
    let delta = 0; // gwei; every term is an exact integer and sums stay far below 2^53
    const all = c.idxAll;
    for (let k = all.off[a]!; k < all.off[a + 1]!; k++) {
      const t = all.ids[k]!;
      const b = c.txBlk[t]!;
      if (b > head) break;
      const kb = c.txKind[t]!;
      const ok = (kb & F_FAILED) === 0;
      const v = ok && !(kb & F_MAXVALUE) ? c.valueGwei(t, kb) : 0;
      if (c.txFrom[t] === a) {
        c.gasOf(t, kb, b);
        delta -= G.used * G.price;
        delta -= v;
      }
      if (c.txTo[t] === a && (kb & 15) !== K_CREATE) delta += v;
    }
    const it = c.idxItx;
    for (let k = it.off[a]!; k < it.off[a + 1]!; k++) {
      const r = it.ids[k]!;
      const t = c.itxParent[r]!;
      if (c.txBlk[t]! > head) break;
      if (c.txKind[t]! & F_FAILED) continue;
      const v = itxValueGwei(c, r);
      if (v === 0) continue;
      if (c.itxFrom[r] === a) delta -= v;
      if (c.itxTo[r] === a) delta += v;
    }
    const mined = c.idxMined;
    for (let k = mined.off[a]!; k < mined.off[a + 1]!; k++) {
      const b = mined.ids[k]!;
      if (b > head) break;
      delta += MINING_REWARD_GWEI + c.blockFeeGwei[b]!;
    }
    return c.genesisWei(a) + BigInt(delta) * 1_000_000_000n;
  });
}

export interface NftToken {
  contract: number;
  idx: number;
}

/** ERC-20 units held by address a at head, per token (only non-zero). */
export function erc20Holdings(c: Chain, a: number, head: number): Map<number, number> {
  return cached(c, `h20:${a}:${head}`, () => {
    const units = new Map<number, number>();
    const x = c.idxErc20;
    for (let k = x.off[a]!; k < x.off[a + 1]!; k++) {
      const r = x.ids[k]!;
      if (c.txBlk[c.logTx[r]!]! > head) break;
      const tk = c.logContract[r]! - A_ERC20_0;
      const amt = c.logAmt[r]!;
      if (c.logFrom[r] === a) units.set(tk, (units.get(tk) ?? 0) - amt);
      if (c.logTo[r] === a) units.set(tk, (units.get(tk) ?? 0) + amt);
    }
    for (const [k, v] of units) if (v === 0) units.delete(k);
    return units;
  });
}

/** NFTs owned by address a at head, ordered by contract then token index. */
export function nftHoldings(c: Chain, a: number, head: number): NftToken[] {
  return cached(c, `h721:${a}:${head}`, () => {
    const owned = new Set<number>(); // contract * 2^24 + idx
    const x = c.idxErc721;
    for (let k = x.off[a]!; k < x.off[a + 1]!; k++) {
      const r = x.ids[k]!;
      if (c.txBlk[c.logTx[r]!]! > head) break;
      const key = (c.logContract[r]! - A_ERC721_0) * 16_777_216 + c.logAmt[r]!;
      if (c.logFrom[r] === a) owned.delete(key);
      if (c.logTo[r] === a) owned.add(key);
    }
    return [...owned].sort((p, q) => p - q).map((key) => ({ contract: Math.floor(key / 16_777_216), idx: key % 16_777_216 }));
  });
}

/** Owner (address index) of every minted token of NFT contract nft at head; index = token index. */
export function nftOwners(c: Chain, nft: number, head: number): Uint32Array {
  return cached(c, `own:${nft}:${head}`, () => {
    const contract = A_ERC721_0 + nft;
    const x = c.idxLogs;
    const owners: number[] = [];
    for (let k = x.off[contract]!; k < x.off[contract + 1]!; k++) {
      const r = x.ids[k]!;
      if (c.logKind[r] !== L_ERC721) continue;
      if (c.txBlk[c.logTx[r]!]! > head) break;
      owners[c.logAmt[r]!] = c.logTo[r]!;
    }
    return Uint32Array.from(owners);
  });
}

/** ERC-20 total supply in units (mints; the token has no burns), or NFT count minted, at head. */
export function totalSupplyUnits(c: Chain, contract: number, head: number): number {
  return cached(c, `sup:${contract}:${head}`, () => {
    const x = c.idxLogs;
    let s = 0;
    for (let k = x.off[contract]!; k < x.off[contract + 1]!; k++) {
      const r = x.ids[k]!;
      const kind = c.logKind[r];
      if (kind !== L_ERC20 && kind !== L_ERC721) continue;
      if (c.txBlk[c.logTx[r]!]! > head) break;
      if (c.logFrom[r] === A_ZERO) s += kind === L_ERC20 ? c.logAmt[r]! : 1;
    }
    return s;
  });
}

export { WEIRD_TOKEN, K_CALL };
