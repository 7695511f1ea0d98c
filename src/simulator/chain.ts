// The synthetic chain: generated once per (network, seed, scale) into compact typed-array columns, with
// per-address indexes built by counting sort. Everything not needed for indexing (hashes, gas, values, names)
// is derived from ids at render time by hashing, so memory stays small and every byte is reproducible.

import { Rng, hash2, hash3, mix32, unmix32 } from './rng.js';
import { word8 } from './hex.js';
import { checksumAsciiInto, toChecksumAddress } from '../evm/keccak.js';
import { type ByteOut, lit } from './bytes.js';

export type Network = 'mainnet' | 'testnet';
export type ScaleName = 'small' | 'medium' | 'large';

export interface Preset {
  visibleBlocks: number; // initial head
  reserveBlocks: number; // pre-generated blocks above the head, revealed by a moving head
  whaleTxs: number; // target whale transactions within the initial head
  othersMean: number; // background transactions per block
  ordinary: number; // plain externally owned accounts
  createdContracts: number;
  crowdedTxs: number; // transactions of the crowded address inside its one crowded block
}

export const PRESETS: Record<ScaleName | 'testnet', Preset> = {
  small: { visibleBlocks: 36_000, reserveBlocks: 3_600, whaleTxs: 108_000, othersMean: 4, ordinary: 20_000, createdContracts: 96, crowdedTxs: 10_050 },
  medium: { visibleBlocks: 216_000, reserveBlocks: 7_200, whaleTxs: 324_000, othersMean: 3, ordinary: 60_000, createdContracts: 256, crowdedTxs: 10_050 },
  large: {
    visibleBlocks: 1_000_000,
    reserveBlocks: 14_400,
    whaleTxs: 1_100_000,
    othersMean: 1.5,
    ordinary: 150_000,
    createdContracts: 512,
    crowdedTxs: 10_050,
  },
  testnet: { visibleBlocks: 21_600, reserveBlocks: 3_600, whaleTxs: 43_200, othersMean: 2, ordinary: 6_000, createdContracts: 48, crowdedTxs: 10_050 },
};

export const NONE = 0xffffffff;

const ZERO_HEX40 = lit('0'.repeat(40));

// Transaction kinds (low nibble of txKind) and flags.
export const K_TRANSFER = 0,
  K_CALL = 1,
  K_ERC20 = 2,
  K_ERC721 = 3,
  K_CREATE = 4,
  K_MINT20 = 5,
  K_MINT721 = 6;
export const F_FAILED = 16,
  F_MAXVALUE = 32;

// Log kinds.
export const L_ERC20 = 0,
  L_ERC721 = 1,
  L_SWAP = 2,
  L_DEPOSIT = 3,
  L_UNNAMED = 4;

// Fixed address layout (indexes into the address space of one network).
export const A_ZERO = 0,
  A_WHALE = 1,
  A_MINER0 = 2,
  N_MINERS = 8,
  A_BUSY0 = 10,
  N_BUSY = 6,
  A_CROWDED = 16,
  A_NFT_HOLDER = 17,
  A_DEPLOYER = 18,
  A_ERC20_0 = 19,
  N_ERC20 = 8,
  A_ERC721_0 = 27,
  N_ERC721 = 4,
  A_POOL0 = 31,
  N_POOLS = 4,
  A_STAKING = 35,
  A_CREATED0 = 36;

export interface TokenMeta {
  name: string | null;
  symbol: string | null;
  decimals: number | null;
}
export const ERC20_META: TokenMeta[] = [
  { name: 'Wrapped Ether', symbol: 'WETH', decimals: 18 },
  { name: 'USD Stable', symbol: 'USDS', decimals: 6 },
  { name: 'Grand Token', symbol: 'GRND', decimals: 18 },
  { name: 'Bridged Bitcoin', symbol: 'BBTC', decimals: 8 },
  { name: 'Game Gold', symbol: 'GOLD', decimals: 0 },
  { name: null, symbol: null, decimals: null }, // the max-amount token: one unit is 2^256-1
  { name: 'Nine Decimals', symbol: 'NINE', decimals: 9 },
  { name: 'Liquid Staked Grand', symbol: 'LSG', decimals: 18 },
];
export const WEIRD_TOKEN = 5;
export const ERC721_META: TokenMeta[] = [
  { name: 'Chain Punks', symbol: 'CPUNK', decimals: 0 },
  { name: 'Pixel Lands', symbol: 'LAND', decimals: 0 },
  { name: null, symbol: null, decimals: null },
  { name: 'Event Ticket', symbol: 'TIX', decimals: 0 },
];

// Internal-call trace shapes; deep ones exercise nested trace_address arrays.
export const TRACE_TEMPLATES: number[][][] = [
  [[0]],
  [[0], [1]],
  [[0], [0, 0], [1]],
  [[0], [0, 0], [0, 0, 0], [0, 0, 0, 0], [0, 1], [1]],
  [[0], [0, 0], [0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0], [0, 0, 1]],
  [[0], [1], [2]],
];
/** Index of each entry's parent entry in its template (-1 for depth 1). */
export const TRACE_PARENT: number[][] = TRACE_TEMPLATES.map((tpl) =>
  tpl.map((ta) => (ta.length === 1 ? -1 : tpl.findIndex((p) => p.length === ta.length - 1 && p.every((v, i) => v === ta[i])))),
);
export const TRACE_SUBS: number[][] = TRACE_TEMPLATES.map((tpl) =>
  tpl.map((ta) => tpl.filter((c) => c.length === ta.length + 1 && ta.every((v, i) => v === c[i])).length),
);

export const GENESIS_SECONDS = Date.UTC(2024, 2, 1) / 1000; // 2024-03-01T00:00:00Z
export const BLOCK_SECONDS = 12;
export const BYZANTIUM_BLOCK = 300;

export interface Csr {
  off: Uint32Array;
  ids: Uint32Array;
}

class Grow {
  a: Uint32Array;
  n = 0;
  constructor(cap: number) {
    this.a = new Uint32Array(Math.max(16, cap));
  }
  push(v: number): void {
    if (this.n === this.a.length) {
      const b = new Uint32Array(this.a.length * 2);
      b.set(this.a);
      this.a = b;
    }
    this.a[this.n++] = v;
  }
  done(): Uint32Array {
    return this.a.subarray(0, this.n);
  }
}
class Grow8 {
  a: Uint8Array;
  n = 0;
  constructor(cap: number) {
    this.a = new Uint8Array(Math.max(16, cap));
  }
  push(v: number): void {
    if (this.n === this.a.length) {
      const b = new Uint8Array(this.a.length * 2);
      b.set(this.a);
      this.a = b;
    }
    this.a[this.n++] = v;
  }
  done(): Uint8Array {
    return this.a.subarray(0, this.n);
  }
}

/** Scratch result of gasOf(); module-level to avoid allocating per row. */
export const G = { limit: 0, used: 0, price: 0, maxFee: 0, prio: 0, legacy: false };

function buildCsr(nKeys: number, nRows: number, keyA: (r: number) => number, keyB: ((r: number) => number) | null): Csr {
  const off = new Uint32Array(nKeys + 1);
  for (let r = 0; r < nRows; r++) {
    const a = keyA(r);
    if (a !== NONE) off[a + 1]!++;
    if (keyB) {
      const b = keyB(r);
      if (b !== NONE && b !== a) off[b + 1]!++;
    }
  }
  for (let k = 0; k < nKeys; k++) off[k + 1]! += off[k]!;
  const ids = new Uint32Array(off[nKeys]!);
  const pos = off.slice(0, nKeys);
  for (let r = 0; r < nRows; r++) {
    const a = keyA(r);
    if (a !== NONE) ids[pos[a]!++] = r;
    if (keyB) {
      const b = keyB(r);
      if (b !== NONE && b !== a) ids[pos[b]!++] = r;
    }
  }
  return { off, ids };
}

let chainCount = 0;

export class Chain {
  /** Distinguishes chains in process-wide caches (views with their own head share it). */
  readonly uid = ++chainCount;
  readonly network: Network;
  readonly seed: number;
  readonly preset: Preset;
  readonly numAddr: number;
  readonly maxHeight: number;
  head: number;
  readonly crowdedBlock: number;
  // keys for hash derivation
  readonly kAddr: number;
  readonly kTx: number;
  readonly kBlock: number;
  readonly kVal: number;

  // transactions, in (block, index) order: the tx id is its global position
  txBlk!: Uint32Array;
  txFrom!: Uint32Array;
  txTo!: Uint32Array;
  txKind!: Uint8Array;
  txCumGas!: Uint32Array;
  nTx = 0;
  blockFirstTx!: Uint32Array;
  blockFeeGwei!: Float64Array;
  minerOf!: Uint8Array;
  // logs, in (block, tx, log index) order
  logTx!: Uint32Array;
  logContract!: Uint32Array;
  logFrom!: Uint32Array;
  logTo!: Uint32Array;
  logAmt!: Uint32Array;
  logKind!: Uint8Array;
  nLog = 0;
  blockFirstLog!: Uint32Array;
  // internal transactions, in (tx, trace position) order
  itxParent!: Uint32Array;
  itxFrom!: Uint32Array;
  itxTo!: Uint32Array;
  itxPos!: Uint8Array;
  nItx = 0;
  // indexes
  idxAll!: Csr;
  idxFrom!: Csr;
  idxTo!: Csr;
  idxCreate!: Csr;
  idxItx!: Csr;
  idxErc20!: Csr;
  idxErc721!: Csr;
  idxLogs!: Csr;
  idxMined!: Csr;
  /** Token ids minted per ERC-721 contract (token id = index + 1). */
  nftMinted: number[] = [];
  readonly createdEnd: number;
  createdUsed = 0;

  private lower: string[] = [];
  private checksum: (string | undefined)[] = [];
  /**
   * Tables built on first use, in an object so that the head views of this chain (Object.create) share them:
   * every transaction's nonce, and the EIP-55 ASCII of addresses (42 bytes each, filled as they are served).
   */
  private readonly lazy: { nonce?: Uint32Array; checksumAscii?: Uint8Array; checksumView?: DataView } = {};
  private upper: (string | undefined)[] = [];

  constructor(network: Network, seed: number, scale: ScaleName) {
    this.network = network;
    this.seed = network === 'mainnet' ? seed >>> 0 : hash2(seed >>> 0, 0x7e57);
    this.preset = network === 'mainnet' ? PRESETS[scale] : PRESETS.testnet;
    const p = this.preset;
    this.kAddr = hash2(this.seed, 1);
    this.kTx = hash2(this.seed, 2);
    this.kBlock = hash2(this.seed, 3);
    this.kVal = hash2(this.seed, 4);
    this.createdEnd = A_CREATED0 + p.createdContracts;
    this.numAddr = this.createdEnd + p.ordinary;
    this.maxHeight = p.visibleBlocks + p.reserveBlocks;
    this.head = p.visibleBlocks;
    this.crowdedBlock = Math.floor(p.visibleBlocks * 0.6) + 7;
    for (let i = 0; i < this.numAddr; i++) this.lower.push(this.computeAddress(i));
    this.generate();
  }

  // ---- identities -------------------------------------------------------------------------------

  private computeAddress(i: number): string {
    if (i === A_ZERO) return '0x0000000000000000000000000000000000000000';
    const w0 = mix32((i + this.kAddr) >>> 0);
    return (
      '0x' + word8(w0) + word8(hash3(w0, this.kAddr, 1)) + word8(hash3(w0, this.kAddr, 2)) + word8(hash3(w0, this.kAddr, 3)) + word8(hash3(w0, this.kAddr, 4))
    );
  }

  addrLower(i: number): string {
    return this.lower[i]!;
  }

  /** Letter-case style 0 lower, 1 EIP-55 checksum, 2 upper hex digits. */
  addrCase(i: number, style: number): string {
    if (style === 0 || i === A_ZERO) return this.lower[i]!;
    if (style === 1) {
      let s = this.checksum[i];
      if (s === undefined) {
        s = toChecksumAddress(this.lower[i]!);
        this.checksum[i] = s;
      }
      return s;
    }
    let s = this.upper[i];
    if (s === undefined) {
      s = '0x' + this.lower[i]!.slice(2).toUpperCase();
      this.upper[i] = s;
    }
    return s;
  }

  /** Writes addrCase(i, style) as ASCII. */
  writeAddr(out: ByteOut, i: number, style: number): void {
    if (style !== 1 || i === A_ZERO) {
      out.byte(48);
      out.byte(120);
      this.writeAddrHex(out, i, style === 2);
      return;
    }
    // EIP-55 needs a keccak per address: its ASCII is kept, filled on first use. A filled slot starts with
    // '0' (48), so the slot itself says whether it is filled.
    let bytes = this.lazy.checksumAscii,
      view = this.lazy.checksumView;
    if (bytes === undefined || view === undefined) {
      bytes = this.lazy.checksumAscii = new Uint8Array(this.numAddr * 42);
      view = this.lazy.checksumView = new DataView(bytes.buffer);
    }
    const o = i * 42;
    if (bytes[o] === 0) checksumAsciiInto(this.lower[i]!, bytes, o);
    out.copy4(view, o, 42);
  }

  /** The 40 hex digits of address i without 0x (lower or upper case), e.g. the end of an event-log topic. */
  writeAddrHex(out: ByteOut, i: number, upper: boolean): void {
    if (i === A_ZERO) {
      out.lit(ZERO_HEX40);
      return;
    }
    // Recomputed from the address's hash words (computeAddress, with hash2(w0, kAddr) shared by its four hash3
    // words): cheaper than the cache miss of reading a random address's bytes.
    const w0 = mix32((i + this.kAddr) >>> 0),
      h = hash2(w0, this.kAddr);
    out.word(w0, upper);
    for (let j = 1; j < 5; j++) out.word(mix32((h + Math.imul(j, 0x165667b1) + 0x7f4a7c15) >>> 0), upper);
  }

  /** Address index for a 0x address in any letter case, or -1 when this chain has no such address. */
  findAddress(addr: string): number {
    const s = addr.toLowerCase();
    if (s === this.lower[0]) return 0;
    const w0 = parseInt(s.slice(2, 10), 16);
    if (!Number.isFinite(w0)) return -1;
    const i = (unmix32(w0) - this.kAddr) >>> 0;
    return i > 0 && i < this.numAddr && this.lower[i] === s ? i : -1;
  }

  txHash(t: number): string {
    const w0 = mix32((t + this.kTx) >>> 0);
    let s = '0x' + word8(w0);
    for (let j = 1; j < 8; j++) s += word8(hash3(w0, this.kTx, j));
    return s;
  }

  // The writers inline hash3(a, b, j) = mix32(hash2(a, b) + j * 0x165667b1 + 0x7f4a7c15): hash2(a, b) is the
  // same for the eight words of a hash, so it is computed once (same bytes as txHash / blockHash).
  writeTxHash(out: ByteOut, t: number, upper: boolean): void {
    const w0 = mix32((t + this.kTx) >>> 0);
    const h = hash2(w0, this.kTx);
    out.byte(48);
    out.byte(120);
    out.word(w0, upper);
    for (let j = 1; j < 8; j++) out.word(mix32((h + Math.imul(j, 0x165667b1) + 0x7f4a7c15) >>> 0), upper);
  }

  writeBlockHash(out: ByteOut, b: number, upper: boolean): void {
    const h = hash2(b, this.kBlock);
    out.byte(48);
    out.byte(120);
    for (let j = 0; j < 8; j++) out.word(mix32((h + Math.imul(j, 0x165667b1) + 0x7f4a7c15) >>> 0), upper);
  }

  /** Tx id of a 0x hash in any case, or -1. Visibility (block <= head) is the caller's concern. */
  findTx(hash: string): number {
    const s = hash.toLowerCase();
    const w0 = parseInt(s.slice(2, 10), 16);
    if (!Number.isFinite(w0)) return -1;
    const t = (unmix32(w0) - this.kTx) >>> 0;
    return t < this.nTx && this.txHash(t) === s ? t : -1;
  }

  blockHash(b: number): string {
    let s = '0x';
    for (let j = 0; j < 8; j++) s += word8(hash3(b, this.kBlock, j));
    return s;
  }

  blockSeconds(b: number): number {
    return GENESIS_SECONDS + b * BLOCK_SECONDS + (b === 0 ? 0 : hash2(this.kBlock, b) % 4);
  }

  baseFeeGwei(b: number): number {
    return 8 + (hash2(this.kBlock ^ 0x5a5a, b) % 40);
  }

  /** Gas figures of a transaction into G (gwei prices). */
  gasOf(t: number, kindByte: number, b: number): void {
    const h = hash2(this.kVal, t);
    const kind = kindByte & 15;
    let limit: number, used: number;
    switch (kind) {
      case K_TRANSFER:
        limit = h % 20 === 0 ? 30_000 : 21_000;
        used = 21_000;
        break;
      case K_ERC20:
      case K_MINT20:
        limit = 60_000 + (h % 40_000);
        used = 34_000 + ((h >>> 8) % 22_000);
        break;
      case K_ERC721:
      case K_MINT721:
        limit = 90_000 + (h % 60_000);
        used = 52_000 + ((h >>> 8) % 33_000);
        break;
      case K_CALL:
        limit = 150_000 + (h % 450_000);
        used = Math.floor(limit * (0.35 + ((h >>> 12) % 55) / 100));
        break;
      default:
        limit = 1_200_000 + (h % 1_800_000);
        used = Math.floor(limit * (0.6 + ((h >>> 12) % 35) / 100));
        break;
    }
    if (kindByte & F_FAILED && kind === K_CALL && (h >>> 20) % 3 === 0) used = limit; // out of gas
    const base = this.baseFeeGwei(b);
    const h2 = hash2(this.kVal ^ 0x1234567, t);
    G.limit = limit;
    G.used = used;
    if (h2 % 4 === 0) {
      G.legacy = true;
      G.price = base + 1 + ((h2 >>> 4) % 5);
      G.maxFee = 0;
      G.prio = 0;
    } else {
      G.legacy = false;
      G.prio = 1 + ((h2 >>> 4) % 3);
      G.maxFee = base + G.prio + ((h2 >>> 8) % 30);
      G.price = base + G.prio;
    }
  }

  /** Native value of a transaction in gwei (exact double); F_MAXVALUE txs are rendered as 2^256-1 instead. */
  valueGwei(t: number, kindByte: number): number {
    const kind = kindByte & 15;
    const h = hash2(this.kVal ^ 0x0badf00d, t);
    if (kind === K_TRANSFER) {
      const bucket = h % 20;
      if (bucket === 0) return 0;
      const m = 1 + ((h >>> 5) % 9_999);
      if (bucket < 5) return m * 100; // up to ~0.001 ETH
      if (bucket < 16) return m * 100_000; // up to ~1 ETH
      return m * 1_000_000; // up to ~10 ETH
    }
    if (kind === K_CALL) return h % 5 < 2 ? (1 + ((h >>> 5) % 50_000)) * 10_000 : 0;
    return 0;
  }

  /** Genesis allocation (wei) so every balance stays non-negative. */
  genesisWei(i: number): bigint {
    if (i === A_WHALE) return 10n ** 26n;
    if (i === A_ZERO || (i >= A_ERC20_0 && i < this.createdEnd)) return 0n;
    if (i < A_ERC20_0) return 10n ** 24n + BigInt(hash2(this.kAddr, i) % 1000) * 10n ** 18n;
    return 10n ** 21n + BigInt(hash2(this.kAddr, i) % 100_000) * 10n ** 18n;
  }

  isContract(i: number): boolean {
    return i >= A_ERC20_0 && i < this.createdEnd;
  }

  /** Block in which contract i was created (NONE if never). */
  creationTx(i: number): number {
    const o = this.idxCreate.off;
    for (let k = o[i]!; k < o[i + 1]!; k++) {
      const t = this.idxCreate.ids[k]!;
      if (this.txTo[t] === i) return t;
    }
    return NONE;
  }

  // ---- generation ---------------------------------------------------------------------------------

  /** The chain's columns: written block by block (ChainBuilder), then indexed by address. */
  private generate(): void {
    const built = new ChainBuilder(this).build();
    this.txBlk = built.txBlk.done();
    this.txFrom = built.txFrom.done();
    this.txTo = built.txTo.done();
    this.txKind = built.txKind.done();
    this.txCumGas = built.txCum.done();
    this.nTx = built.txBlk.n;
    this.blockFirstTx = built.blockFirstTx;
    this.blockFeeGwei = built.blockFee;
    this.minerOf = built.minerOf;
    this.logTx = built.logTx.done();
    this.logContract = built.logC.done();
    this.logFrom = built.logF.done();
    this.logTo = built.logT.done();
    this.logAmt = built.logA.done();
    this.logKind = built.logK.done();
    this.nLog = built.logTx.n;
    this.blockFirstLog = built.blockFirstLog;
    this.itxParent = built.itP.done();
    this.itxFrom = built.itF.done();
    this.itxTo = built.itT.done();
    this.itxPos = built.itPos.done();
    this.nItx = built.itP.n;
    this.nftMinted = built.nftOwner.map((g) => g.n);
    this.buildIndexes();
  }

  /** Per-address indexes (CSR) of transactions, internal transactions, token transfers, logs and mined blocks. */
  private buildIndexes(): void {
    const numAddr = this.numAddr;
    const H = this.maxHeight;
    const { txFrom: F, txTo: T, txKind: K } = this;
    this.idxAll = buildCsr(
      numAddr,
      this.nTx,
      (r) => F[r]!,
      (r) => T[r]!,
    );
    this.idxFrom = buildCsr(numAddr, this.nTx, (r) => F[r]!, null);
    this.idxTo = buildCsr(numAddr, this.nTx, (r) => ((K[r]! & 15) === K_CREATE ? NONE : T[r]!), null);
    this.idxCreate = buildCsr(
      numAddr,
      this.nTx,
      (r) => ((K[r]! & 15) === K_CREATE ? F[r]! : NONE),
      (r) => ((K[r]! & 15) === K_CREATE ? T[r]! : NONE),
    );
    const IF = this.itxFrom,
      IT = this.itxTo;
    this.idxItx = buildCsr(
      numAddr,
      this.nItx,
      (r) => IF[r]!,
      (r) => IT[r]!,
    );
    const LK = this.logKind,
      LF = this.logFrom,
      LT = this.logTo,
      LC = this.logContract;
    this.idxErc20 = buildCsr(
      numAddr,
      this.nLog,
      (r) => (LK[r] === L_ERC20 ? LF[r]! : NONE),
      (r) => (LK[r] === L_ERC20 ? LT[r]! : NONE),
    );
    this.idxErc721 = buildCsr(
      numAddr,
      this.nLog,
      (r) => (LK[r] === L_ERC721 ? LF[r]! : NONE),
      (r) => (LK[r] === L_ERC721 ? LT[r]! : NONE),
    );
    this.idxLogs = buildCsr(numAddr, this.nLog, (r) => LC[r]!, null);
    const MO = this.minerOf;
    this.idxMined = buildCsr(numAddr, H + 1, (r) => (r === 0 ? NONE : A_MINER0 + MO[r]!), null);
  }

  // ---- queries ------------------------------------------------------------------------------------

  /** Positions [lo, hi) within ids[off[a]..off[a+1]) whose row block lies in [from, to]. */
  range(csr: Csr, a: number, blockOf: (row: number) => number, from: number, to: number): [number, number] {
    const start = csr.off[a]!,
      end = csr.off[a + 1]!;
    const ids = csr.ids;
    let lo = start,
      hi = end;
    while (lo < hi) {
      const m = (lo + hi) >>> 1;
      if (blockOf(ids[m]!) < from) lo = m + 1;
      else hi = m;
    }
    const first = lo;
    hi = end;
    while (lo < hi) {
      const m = (lo + hi) >>> 1;
      if (blockOf(ids[m]!) <= to) lo = m + 1;
      else hi = m;
    }
    return [first, lo];
  }

  /** Sender nonce: the position of the tx among its sender's transactions. */
  nonceOf(t: number): number {
    // One table of every transaction's nonce (4 bytes per transaction, ~11 MB at large scale), built on first
    // use: listings read it in transaction order, where a binary search over the sender's list cost several
    // cache misses per row.
    let n = this.lazy.nonce;
    if (n === undefined) {
      n = new Uint32Array(this.nTx);
      const { off, ids } = this.idxFrom;
      for (let a = 0; a + 1 < off.length; a++) for (let k = off[a]!, s = k; k < off[a + 1]!; k++) n[ids[k]!] = k - s;
      this.lazy.nonce = n;
    }
    return n[t]!;
  }

  /** First log id of tx t (logs are stored in tx order), and the end. */
  logsOfTx(t: number): [number, number] {
    const L = this.logTx;
    let lo = this.blockFirstLog[this.txBlk[t]!]!,
      hi = this.blockFirstLog[this.txBlk[t]! + 1]!;
    const end0 = hi;
    while (lo < hi) {
      const m = (lo + hi) >>> 1;
      if (L[m]! < t) lo = m + 1;
      else hi = m;
    }
    let e = lo;
    while (e < end0 && L[e] === t) e++;
    return [lo, e];
  }

  itxOfTx(t: number): [number, number] {
    const P = this.itxParent;
    let lo = 0,
      hi = this.nItx;
    while (lo < hi) {
      const m = (lo + hi) >>> 1;
      if (P[m]! < t) lo = m + 1;
      else hi = m;
    }
    let e = lo;
    while (e < this.nItx && P[e] === t) e++;
    return [lo, e];
  }

  /** The latest visible block (tx rows above the head do not exist yet). */
  setHead(h: number): void {
    this.head = Math.max(0, Math.min(this.maxHeight, h));
  }
}

/**
 * Writes a chain's columns block by block from its seed: who acts in each block (roles), what each actor does
 * (a transfer, an ERC-20 or ERC-721 move or mint, a contract call with its internal calls and logs, a creation),
 * and each block's miner and fees. One random stream drives it all, in a fixed order: the same seed gives the
 * same chain, so each step below draws from `rng` exactly as it always has.
 */
class ChainBuilder {
  private readonly rng: Rng;
  private readonly p: Preset;
  readonly txBlk: Grow;
  readonly txFrom: Grow;
  readonly txTo: Grow;
  readonly txCum: Grow;
  readonly txKind: Grow8;
  readonly logTx: Grow;
  readonly logC: Grow;
  readonly logF: Grow;
  readonly logT: Grow;
  readonly logA: Grow;
  readonly logK: Grow8;
  readonly itP: Grow;
  readonly itF: Grow;
  readonly itT: Grow;
  readonly itPos: Grow8;
  readonly blockFirstTx: Uint32Array;
  readonly blockFirstLog: Uint32Array;
  readonly blockFee: Float64Array;
  readonly minerOf: Uint8Array;
  readonly nftOwner: Grow[] = [];
  private readonly bal20: Float64Array;
  private readonly lastNft: Int32Array;
  private readonly ordinary0: number;
  private readonly busyShare: number;
  /** The block being written, and its running cumulative gas and fees. */
  private b = 0;
  private cum = 0;
  private fee = 0;

  constructor(private readonly chain: Chain) {
    const p = (this.p = chain.preset);
    this.rng = new Rng(chain.seed ^ 0x00c0ffee);
    const H = chain.maxHeight;
    const estTx = Math.ceil((p.whaleTxs / p.visibleBlocks + p.othersMean + 0.6) * H * 1.15) + p.crowdedTxs + 1000;
    this.txBlk = new Grow(estTx);
    this.txFrom = new Grow(estTx);
    this.txTo = new Grow(estTx);
    this.txCum = new Grow(estTx);
    this.txKind = new Grow8(estTx);
    const estLog = Math.ceil(estTx * 0.5);
    this.logTx = new Grow(estLog);
    this.logC = new Grow(estLog);
    this.logF = new Grow(estLog);
    this.logT = new Grow(estLog);
    this.logA = new Grow(estLog);
    this.logK = new Grow8(estLog);
    const estItx = Math.ceil(estTx * 0.6);
    this.itP = new Grow(estItx);
    this.itF = new Grow(estItx);
    this.itT = new Grow(estItx);
    this.itPos = new Grow8(estItx);
    this.blockFirstTx = new Uint32Array(H + 2);
    this.blockFirstLog = new Uint32Array(H + 2);
    this.blockFee = new Float64Array(H + 1);
    this.minerOf = new Uint8Array(H + 1);
    this.bal20 = new Float64Array(chain.numAddr * N_ERC20);
    for (let c = 0; c < N_ERC721; c++) this.nftOwner.push(new Grow(1024));
    this.lastNft = new Int32Array(chain.numAddr).fill(-1);
    this.ordinary0 = chain.createdEnd;
    // Busy addresses appear as counterparties rarely enough to stay at a few thousand transactions at any scale.
    this.busyShare = Math.min(0.01, 60 / p.visibleBlocks / p.othersMean);
  }

  build(): this {
    const p = this.p;
    const H = this.chain.maxHeight;
    const whaleRate = p.whaleTxs / p.visibleBlocks;
    const minerCum: number[] = [];
    {
      let s = 0;
      for (const w of MINER_WEIGHTS) minerCum.push((s += w));
    }
    const roles = new Int32Array(p.crowdedTxs + 64);
    const createEvery = Math.max(50, Math.floor(p.visibleBlocks / (p.createdContracts + 8)));
    for (let b = 0; b <= H; b++) {
      this.b = b;
      this.blockFirstTx[b] = this.txBlk.n;
      this.blockFirstLog[b] = this.logTx.n;
      this.cum = 0;
      this.fee = 0;
      if (b === 0) continue;
      const mr = this.rng.int(100);
      let m = 0;
      while (minerCum[m]! <= mr) m++;
      this.minerOf[b] = m;
      this.wellKnownContracts(b);
      const nr = this.rolesOfBlock(b, whaleRate, roles);
      for (let i = 0; i < nr; i++) {
        const P = roles[i]!;
        this.role(P < 0 ? this.randOrdinary() : P);
      }
      // A few whale transactions with value 2^256-1: they can only fail.
      if (b % 7919 === 13) this.emitTx(A_WHALE, this.randOrdinary(), K_TRANSFER | F_FAILED | F_MAXVALUE);
      // Contract creations by the busy addresses and others, spread over the chain.
      if (b % createEvery === 5) this.create(b % (2 * createEvery) === 5 ? A_BUSY0 + (b % N_BUSY) : this.randOrdinary());
      this.blockFee[b] = this.fee;
    }
    this.blockFirstTx[H + 1] = this.txBlk.n;
    this.blockFirstLog[H + 1] = this.logTx.n;
    return this;
  }

  /** The well-known contracts deployed in the first blocks, and the odd token's two moves. */
  private wellKnownContracts(b: number): void {
    if (b <= 17) {
      const target = b <= 8 ? A_ERC20_0 + b - 1 : b <= 12 ? A_ERC721_0 + b - 9 : b <= 16 ? A_POOL0 + b - 13 : A_STAKING;
      this.emitTx(A_DEPLOYER, target, K_CREATE);
    }
    if (b === 20) {
      const t = this.emitTx(A_DEPLOYER, A_ERC20_0 + WEIRD_TOKEN, K_MINT20);
      this.emitLog(t, A_ERC20_0 + WEIRD_TOKEN, L_ERC20, A_ZERO, A_BUSY0 + 5, 1);
      this.bal20[(A_BUSY0 + 5) * N_ERC20 + WEIRD_TOKEN] = 1;
    }
    if (b === 31) {
      const t = this.emitTx(A_BUSY0 + 5, A_ERC20_0 + WEIRD_TOKEN, K_ERC20);
      this.emitLog(t, A_ERC20_0 + WEIRD_TOKEN, L_ERC20, A_BUSY0 + 5, A_BUSY0 + 4, 1);
      this.bal20[(A_BUSY0 + 5) * N_ERC20 + WEIRD_TOKEN] = 0;
      this.bal20[(A_BUSY0 + 4) * N_ERC20 + WEIRD_TOKEN] = 1;
    }
  }

  /** Who acts in block `b`, shuffled, into `roles` (-1: an ordinary account drawn when it acts); returns how many. */
  private rolesOfBlock(b: number, whaleRate: number, roles: Int32Array): number {
    const { rng, p } = this;
    let nr = 0;
    let wc = Math.floor(whaleRate);
    if (rng.float() < whaleRate - wc) wc++;
    for (let i = 0; i < wc; i++) roles[nr++] = A_WHALE;
    for (let i = 0; i < N_BUSY; i++) if (rng.float() * p.visibleBlocks < BUSY_TARGETS[i]!) roles[nr++] = A_BUSY0 + i;
    if (rng.float() * p.visibleBlocks < 1500) roles[nr++] = A_NFT_HOLDER;
    if (b === this.chain.crowdedBlock) for (let i = 0; i < p.crowdedTxs; i++) roles[nr++] = A_CROWDED;
    else if (rng.float() * p.visibleBlocks < 900) roles[nr++] = A_CROWDED;
    let no = Math.floor(p.othersMean * 2 * rng.float() + 0.5);
    while (no-- > 0) roles[nr++] = -1;
    for (let i = nr - 1; i > 0; i--) {
      const j = rng.int(i + 1);
      const x = roles[i]!;
      roles[i] = roles[j]!;
      roles[j] = x;
    }
    return nr;
  }

  private emitTx(from: number, to: number, kind: number): number {
    const t = this.txBlk.n;
    this.txBlk.push(this.b);
    this.txFrom.push(from);
    this.txTo.push(to);
    this.txKind.push(kind);
    this.chain.gasOf(t, kind, this.b);
    this.cum += G.used;
    this.txCum.push(this.cum);
    this.fee += G.used * G.price;
    return t;
  }

  private emitLog(t: number, contract: number, kind: number, from: number, to: number, amt: number): void {
    this.logTx.push(t);
    this.logC.push(contract);
    this.logK.push(kind);
    this.logF.push(from);
    this.logT.push(to);
    this.logA.push(amt);
  }

  private randOrdinary(): number {
    return this.ordinary0 + this.rng.int(this.p.ordinary);
  }

  private counterparty(): number {
    const r = this.rng.float();
    if (r < 0.02) return A_WHALE;
    if (r < 0.02 + this.busyShare) return A_BUSY0 + this.rng.int(N_BUSY);
    return this.randOrdinary();
  }

  private failRoll(pct: number): number {
    return this.rng.int(1000) < pct ? F_FAILED : 0;
  }

  /** What one actor does in the block. */
  private role(P: number): void {
    if (P === A_NFT_HOLDER) {
      if (this.rng.float() < 0.85) this.erc721(P, true);
      else this.erc20(P);
      return;
    }
    if (P === A_CROWDED) {
      this.transfer(P, 0);
      return;
    }
    const r = this.rng.float();
    if (r < 0.42) this.transfer(P, 0);
    else if (r < 0.64) this.erc20(P);
    else if (r < 0.74) this.erc721(P, false);
    else if (r < 0.997 || P === A_WHALE) this.call(P);
    else if (!this.create(P)) this.transfer(P, 0);
  }

  private erc20(P: number): void {
    const { rng, bal20 } = this;
    let tk = rng.int(N_ERC20);
    if (tk === WEIRD_TOKEN) tk = 0;
    const bi = P * N_ERC20 + tk;
    const bal = bal20[bi]!;
    const fail = this.failRoll(30);
    const contract = A_ERC20_0 + tk;
    if (bal >= 1 && rng.float() < 0.8) {
      const amt = Math.max(1, Math.floor(bal * (0.01 + rng.float() * 0.5)));
      const Q = this.counterparty();
      const t = this.emitTx(P, contract, K_ERC20 | fail);
      if (!fail) {
        bal20[bi] = bal - amt;
        bal20[Q * N_ERC20 + tk]! += amt;
        this.emitLog(t, contract, L_ERC20, P, Q, amt);
      }
    } else {
      const amt = 1000 + rng.int(10_000_000);
      const t = this.emitTx(P, contract, K_MINT20 | fail);
      if (!fail) {
        bal20[bi] = bal + amt;
        this.emitLog(t, contract, L_ERC20, A_ZERO, P, amt);
      }
    }
  }

  private erc721(P: number, preferMint: boolean): void {
    const { rng, nftOwner, lastNft } = this;
    const fail = this.failRoll(20);
    const last = lastNft[P]!;
    if (!preferMint && last >= 0 && rng.float() < 0.5) {
      const c = last >>> 24,
        id = last & 0xffffff;
      if (nftOwner[c]!.a[id] === P) {
        const Q = this.counterparty();
        const t = this.emitTx(P, A_ERC721_0 + c, K_ERC721 | fail);
        if (!fail) {
          nftOwner[c]!.a[id] = Q;
          lastNft[Q] = (c << 24) | id;
          lastNft[P] = -1;
          this.emitLog(t, A_ERC721_0 + c, L_ERC721, P, Q, id);
        }
        return;
      }
    }
    const c = rng.int(N_ERC721);
    const t = this.emitTx(P, A_ERC721_0 + c, K_MINT721 | fail);
    if (!fail) {
      const id = nftOwner[c]!.n;
      nftOwner[c]!.push(P);
      lastNft[P] = (c << 24) | id;
      this.emitLog(t, A_ERC721_0 + c, L_ERC721, A_ZERO, P, id);
    }
  }

  /** A contract call: its internal calls (a trace template) and, when it succeeds, its logs. */
  private call(P: number): void {
    const { rng } = this;
    const target = rng.int(5) === 4 ? A_STAKING : A_POOL0 + rng.int(N_POOLS);
    const fail = this.failRoll(80);
    const t = this.emitTx(P, target, K_CALL | fail);
    const tpl = hash2(this.chain.kVal ^ 0x77, t) % TRACE_TEMPLATES.length;
    const shape = TRACE_TEMPLATES[tpl]!,
      parents = TRACE_PARENT[tpl]!;
    const tos: number[] = [];
    for (let j = 0; j < shape.length; j++) {
      const from = parents[j]! < 0 ? target : tos[parents[j]!]!;
      let to: number;
      if (j === 0) to = rng.float() < 0.5 ? P : A_ERC20_0 + rng.int(N_ERC20);
      else {
        const r = rng.int(10);
        to = r < 6 ? A_ERC20_0 + rng.int(N_ERC20) : r < 8 ? A_POOL0 + rng.int(N_POOLS) : this.randOrdinary();
      }
      tos.push(to);
      this.itP.push(t);
      this.itF.push(from);
      this.itT.push(to);
      this.itPos.push(j);
    }
    if (!fail) {
      if (target === A_STAKING) this.emitLog(t, target, L_DEPOSIT, P, 0, hash2(t, 9) % 2);
      else {
        this.emitLog(t, target, L_SWAP, P, P, 0);
        if (rng.int(4) === 0) this.emitLog(t, target, L_UNNAMED, 0, 0, 0);
      }
    }
  }

  private create(P: number): boolean {
    const chain = this.chain;
    if (A_CREATED0 + chain.createdUsed >= chain.createdEnd) return false;
    this.emitTx(P, A_CREATED0 + chain.createdUsed++, K_CREATE);
    return true;
  }

  private transfer(P: number, flags: number): void {
    if (this.rng.float() < 0.6 || flags) this.emitTx(P, this.counterparty() === P ? this.randOrdinary() : this.counterparty(), K_TRANSFER | flags);
    else {
      let Q = this.counterparty();
      if (Q === P) Q = this.randOrdinary();
      this.emitTx(Q, P, K_TRANSFER);
    }
  }
}

/** How often each busy address acts, per initial head's blocks; how the miners share the blocks. */
const BUSY_TARGETS = [420, 900, 1500, 2400, 3300, 4800];
const MINER_WEIGHTS = [30, 20, 15, 10, 10, 7, 5, 3];
