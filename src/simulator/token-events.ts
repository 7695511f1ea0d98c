// Logs of the standard token events the chain's own log columns do not model (ERC-20 and ERC-721 Approval,
// ApprovalForAll, ERC-1155 TransferSingle/TransferBatch), a few malformed Transfer logs, and the events of a
// verified "Showcase" contract whose ABI covers every Solidity type a decoder meets (small and 256-bit
// integers, address, bool, bytesN, bytes, string, arrays, tuples, an anonymous event, hashed indexed dynamic
// types). They are real ABI encodings (viem's encoder), derived from the seed.
//
// They sit beside the generated chain instead of inside it: one log in about 8 blocks, emitted by the block's
// last transaction after that block's own logs (log_index = the block's log count), so no log index, page or
// digest of the existing datasets moves. Only `/v1/event-logs` lists them (the transaction and receipt
// listings do not).

import type { AbiEvent } from 'viem';
import { signatureText } from '../evm/abi.js';
import { viem } from '../evm/viem.js';
import { A_CREATED0, A_ERC20_0, A_ERC721_0, A_POOL0, A_WHALE, A_ZERO, Chain, N_ERC20, N_ERC721, NONE, WEIRD_TOKEN } from './chain.js';
import { keccak256Hex } from '../evm/keccak.js';
import { hash2, hash3 } from './rng.js';

/** The ERC-1155 multi-token contract and the Showcase contract (created contracts verified at genesis). */
export const A_MULTI = A_CREATED0;
export const A_SHOWCASE = A_CREATED0 + 3;
/** The ERC-20 token whose Transfer logs include malformed ones (an ERC-721-shaped one, one with short data). */
export const A_ODD_ERC20 = A_ERC20_0 + 7;

export const STANDARD_SIGNATURES = {
  erc20Approval: 'event Approval(address indexed owner, address indexed spender, uint256 value)',
  erc721Approval: 'event Approval(address indexed owner, address indexed approved, uint256 indexed tokenId)',
  approvalForAll: 'event ApprovalForAll(address indexed owner, address indexed operator, bool approved)',
  transferSingle: 'event TransferSingle(address indexed operator, address indexed from, address indexed to, uint256 id, uint256 value)',
  transferBatch: 'event TransferBatch(address indexed operator, address indexed from, address indexed to, uint256[] ids, uint256[] values)',
  erc20Transfer: 'event Transfer(address indexed from, address indexed to, uint256 value)',
  erc721Transfer: 'event Transfer(address indexed from, address indexed to, uint256 indexed tokenId)',
} as const;

/** The Showcase contract's events: every ABI type, an anonymous event and hashed indexed dynamic values. */
export const SHOWCASE_SIGNATURES = [
  'event Configured(uint8 level, int16 delta, uint32 count, int64 offset, uint256 total, int256 balance, address indexed admin, bool enabled, bytes4 selector, bytes32 digest)',
  'event Noted(address indexed author, bytes payload, string note)',
  'event Listed(uint256[] amounts, address[] holders, bytes32[2] pair, int8[] signs)',
  'event Ordered(bytes32 indexed orderId, (address maker, uint128 amount, bool filled) order, (uint16 leg, string venue, uint256 size)[] legs)',
  'event Pinged(bytes32 indexed channel, uint64 nonce, address from) anonymous',
  'event Tagged(string indexed label, bytes indexed blob, uint256[] indexed ids, uint256 value)',
];
let showcase_: readonly AbiEvent[] | undefined;
/** The Showcase events, parsed on first use (viem loads then). Human-readable ABIs have no word for anonymous events: the trailing `anonymous` is read here. */
export function showcaseEvents(): readonly AbiEvent[] {
  showcase_ ??= SHOWCASE_SIGNATURES.map((s) =>
    s.endsWith(' anonymous')
      ? { ...(viem().parseAbiItem(s.slice(0, -' anonymous'.length)) as AbiEvent), anonymous: true }
      : (viem().parseAbiItem(s) as AbiEvent),
  );
  return showcase_;
}
/** topic_0 of every Pinged log (anonymous: its first topic is the indexed channel, not a signature hash). */
export const PING_CHANNEL = keccak256Hex('chainlake.ping');

const ev = (sig: string): AbiEvent => viem().parseAbiItem(sig) as AbiEvent;
let ev_: Record<keyof typeof STANDARD_SIGNATURES, AbiEvent> | undefined;
const EVS = (): Record<keyof typeof STANDARD_SIGNATURES, AbiEvent> =>
  (ev_ ??= Object.fromEntries(Object.entries(STANDARD_SIGNATURES).map(([k, v]) => [k, ev(v)])) as Record<keyof typeof STANDARD_SIGNATURES, AbiEvent>);

let multi_: Record<string, unknown>[] | undefined;
let showcaseAbi_: Record<string, unknown>[] | undefined;
/** The ABI items (JSON) of the multi-token contract, as #14 serves them (built on first use). */
export function multiAbi(): Record<string, unknown>[] {
  multi_ ??= [
    { type: 'constructor', inputs: [{ name: 'uri_', type: 'string', internalType: 'string' }], stateMutability: 'nonpayable' },
    ...viem().parseAbi([STANDARD_SIGNATURES.approvalForAll, STANDARD_SIGNATURES.transferBatch, STANDARD_SIGNATURES.transferSingle]),
    ...viem().parseAbi([
      'function balanceOf(address account, uint256 id) view returns (uint256)',
      'function safeTransferFrom(address from, address to, uint256 id, uint256 amount, bytes data)',
      'function setApprovalForAll(address operator, bool approved)',
    ]),
  ] as Record<string, unknown>[];
  return multi_;
}
/** The Showcase contract's ABI items. */
export function showcaseAbi(): Record<string, unknown>[] {
  showcaseAbi_ ??= [
    { type: 'constructor', inputs: [], stateMutability: 'nonpayable' },
    ...showcaseEvents(),
    ...viem().parseAbi(['function configure(uint8 level, bool enabled)', 'function note(bytes payload, string note)']),
  ] as Record<string, unknown>[];
  return showcaseAbi_;
}

/** One extra log. */
export interface ExtraLog {
  block: number;
  tx: number;
  logIndex: number;
  contract: number;
  topics: string[];
  data: string;
  name: string | null;
  abi: string | null;
}

/** The extra logs of a chain: block, transaction, contract and kind of each, in block order (rendered on use). */
interface Extra {
  block: Uint32Array;
  tx: Uint32Array;
  logIndex: Uint32Array;
  contract: Uint32Array;
  kind: Uint8Array;
  /** Ids of each contract's logs, in block order. */
  byContract: Map<number, number[]>;
}

const X_APPROVAL20 = 0,
  X_APPROVAL721 = 1,
  X_APPROVAL_ALL = 2,
  X_SINGLE = 3,
  X_BATCH = 4,
  X_ODD_721 = 5,
  X_ODD_SHORT = 6,
  X_SHOWCASE = 7;

const extraByChain = new Map<number, Extra>();

function deployedAt(c: Chain, i: number): number {
  const t = c.creationTx(i);
  return t === NONE ? NONE : c.txBlk[t]!;
}

/** The extra logs of chain c (built once per chain). */
export function extraLogs(c: Chain): Extra {
  let x = extraByChain.get(c.uid);
  if (x) return x;
  const found = findExtraLogs(c);
  x = {
    block: Uint32Array.from(found.block),
    tx: Uint32Array.from(found.tx),
    logIndex: Uint32Array.from(found.logIndex),
    contract: Uint32Array.from(found.contract),
    kind: Uint8Array.from(found.kind),
    byContract: logsByContract(found.contract),
  };
  extraByChain.set(c.uid, x);
  return x;
}

/** Extra's columns while they are gathered, block by block. */
interface ExtraColumns {
  block: number[];
  tx: number[];
  logIndex: number[];
  contract: number[];
  kind: number[];
}

/** Every extra log in block order: one in about 8 blocks, by the last transaction, once its contract is deployed. */
function findExtraLogs(c: Chain): ExtraColumns {
  const found: ExtraColumns = { block: [], tx: [], logIndex: [], contract: [], kind: [] };
  const deployed = new Map<number, number>();
  const dep = (i: number): number => {
    let b = deployed.get(i);
    if (b === undefined) {
      b = deployedAt(c, i);
      deployed.set(i, b);
    }
    return b;
  };
  for (let b = 1; b <= c.maxHeight; b++) {
    const h = hash2(c.kVal ^ 0xe7e7, b);
    if ((h & 7) !== 0) continue;
    const t0 = c.blockFirstTx[b]!,
      t1 = c.blockFirstTx[b + 1]!;
    if (t1 <= t0) continue;
    const pick = extraLogKind(h);
    if (!pick || dep(pick.contract) === NONE || dep(pick.contract) >= b) continue;
    found.block.push(b);
    found.tx.push(t1 - 1);
    found.logIndex.push(c.blockFirstLog[b + 1]! - c.blockFirstLog[b]!);
    found.contract.push(pick.contract);
    found.kind.push(pick.kind);
  }
  return found;
}

/** The kind and contract of a block's extra log, from the block's hash `h` (undefined: none after all). */
function extraLogKind(h: number): { kind: number; contract: number } | undefined {
  const sel = (h >>> 3) % 16;
  if (sel < 4) return { kind: X_APPROVAL20, contract: A_ERC20_0 + ((h >>> 8) % N_ERC20) };
  if (sel === 4) return { kind: X_APPROVAL721, contract: A_ERC721_0 + ((h >>> 8) % N_ERC721) };
  if (sel === 5) return { kind: X_APPROVAL_ALL, contract: A_ERC721_0 + ((h >>> 8) % N_ERC721) };
  if (sel < 9) return { kind: X_SINGLE, contract: A_MULTI };
  if (sel === 9) return { kind: X_BATCH, contract: A_MULTI };
  if (sel === 10) return { kind: (h >>> 8) & 1 ? X_ODD_721 : X_ODD_SHORT, contract: A_ODD_ERC20 };
  if (sel < 14) return { kind: X_SHOWCASE, contract: A_SHOWCASE };
  return undefined;
}

/** Ids of each contract's logs, in block order. */
function logsByContract(contract: readonly number[]): Map<number, number[]> {
  const byContract = new Map<number, number[]>();
  for (let i = 0; i < contract.length; i++) {
    let l = byContract.get(contract[i]!);
    if (!l) {
      l = [];
      byContract.set(contract[i]!, l);
    }
    l.push(i);
  }
  return byContract;
}

const MAX = (1n << 256n) - 1n;
/** A 256-bit-ish value of id k: mostly modest amounts, sometimes 0, 2^256-1 or just over 10^38. */
function amount(c: Chain, k: number, salt: number): bigint {
  const h = hash3(c.kVal ^ 0x1155, k, salt);
  switch (h % 23) {
    case 0:
      return 0n;
    case 1:
      return MAX;
    case 2:
      return 10n ** 38n + BigInt(h >>> 5);
    case 3:
      return (1n << 128n) + BigInt(h);
    default:
      return BigInt(h >>> 4) * 10n ** BigInt(h % 19);
  }
}
const word = (c: Chain, k: number, j: number): string => {
  let s = '0x';
  for (let i = 0; i < 8; i++)
    s += hash3(c.kVal ^ 0xb0b0, k * 16 + j, i)
      .toString(16)
      .padStart(8, '0');
  return s;
};
const addr = (c: Chain, i: number): `0x${string}` => c.addrLower(i) as `0x${string}`;

/**
 * A log's topics and data as Solidity emits them. Indexed dynamic values are hashed: strings and bytes as
 * keccak256 of their bytes, arrays as keccak256 of their elements' in-place encoding (viem's encodeEventTopics
 * gives arrays unhashed, so the topics are built here).
 */
function encode(event: AbiEvent, args: Record<string, unknown>): { topics: string[]; data: string } {
  const { encodeAbiParameters, keccak256, stringToBytes, toEventSelector } = viem();
  const topics: string[] = event.anonymous ? [] : [toEventSelector(event)];
  for (const p of event.inputs.filter((q) => q.indexed)) {
    const v = args[p.name!];
    if (p.type === 'string') topics.push(keccak256(stringToBytes(v as string)));
    else if (p.type === 'bytes') topics.push(keccak256(v as `0x${string}`));
    else if (p.type.endsWith(']')) {
      const el = p.type.slice(0, p.type.lastIndexOf('['));
      topics.push(
        keccak256(
          encodeAbiParameters(
            (v as unknown[]).map(() => ({ type: el })),
            v as never,
          ),
        ),
      );
    } else topics.push(encodeAbiParameters([p], [v] as never));
  }
  const plain = event.inputs.filter((p) => !p.indexed);
  const data = encodeAbiParameters(plain, plain.map((p) => args[p.name!]) as never);
  return { topics, data };
}

/** The showcase log of extra log k: which event and its values (derived from k). */
function showcase(c: Chain, k: number, from: number, to: number): { event: AbiEvent; topics: string[]; data: string } {
  const events = showcaseEvents();
  const which = hash3(c.kVal ^ 0x5c5c, k, 0) % events.length;
  const h = hash3(c.kVal ^ 0x5c5c, k, 1); // the values' hash: independent of which event
  const event = events[which]!;
  const signed = (bits: number, salt: number): bigint => {
    const v = BigInt.asIntN(bits, BigInt(hash3(h, k, salt)) * (bits > 32 ? BigInt(hash3(h, k, salt + 1)) : 1n));
    return salt % 5 === 0 ? -(1n << BigInt(bits - 1)) : v; // now and then the most negative value
  };
  const texts = ['', 'plain text', 'ünïcödé ✓ 漢字', 'quote " and \\ backslash', 'x'.repeat(70)];
  let args: Record<string, unknown>;
  switch (event.name) {
    case 'Configured':
      args = {
        level: h & 255,
        delta: Number(signed(16, 1)),
        count: hash3(h, k, 2) >>> 0,
        offset: signed(64, 3),
        total: amount(c, k, 4),
        balance: h % 7 === 0 ? -MAX / 2n : signed(256, 5),
        admin: addr(c, from),
        enabled: (h & 1) === 1,
        selector: word(c, k, 6).slice(0, 10),
        digest: word(c, k, 7),
      };
      break;
    case 'Noted':
      args = {
        author: addr(c, from),
        payload: (h & 3) === 0 ? '0x' : word(c, k, 1) + word(c, k, 2).slice(2, 2 + 2 * (h % 31)),
        note: texts[h % texts.length]!,
      };
      break;
    case 'Listed': {
      const n = h % 4;
      args = {
        amounts: Array.from({ length: n }, (_, j) => amount(c, k, 10 + j)),
        holders: Array.from({ length: (n + 1) % 4 }, (_, j) => addr(c, (from + j) % c.numAddr)),
        pair: [word(c, k, 1), word(c, k, 2)],
        signs: Array.from({ length: n }, (_, j) => Number(BigInt.asIntN(8, BigInt(hash3(h, k, j))))),
      };
      break;
    }
    case 'Ordered':
      args = {
        orderId: word(c, k, 1),
        order: { maker: addr(c, from), amount: amount(c, k, 2) & ((1n << 128n) - 1n), filled: (h & 2) === 2 },
        legs: Array.from({ length: h % 3 }, (_, j) => ({ leg: hash3(h, k, j) & 0xffff, venue: texts[(h + j) % texts.length]!, size: amount(c, k, 20 + j) })),
      };
      break;
    case 'Pinged':
      args = { channel: PING_CHANNEL, nonce: BigInt(hash3(h, k, 1)) * 4_294_967_296n + BigInt(hash3(h, k, 2)), from: addr(c, to) };
      break;
    default: // Tagged
      args = { label: texts[h % texts.length]!, blob: word(c, k, 1), ids: [BigInt(h), amount(c, k, 3)], value: amount(c, k, 4) };
  }
  return { event, ...encode(event, args) };
}

const sigText = (e: AbiEvent): string => signatureText(e);

/** What an extra log's values derive from: its place, its transaction's parties and its own hash. */
interface ExtraLogSeed {
  c: Chain;
  k: number;
  base: Pick<ExtraLog, 'block' | 'tx' | 'logIndex' | 'contract'>;
  kind: number;
  /** The transaction's sender, and its receiver (the whale for a creation). */
  from: number;
  to: number;
  h: number;
}

/** Extra log k, rendered (topics, data, name and ABI text as the API gives them). */
export function extraLog(c: Chain, k: number): ExtraLog {
  const seed = extraLogSeed(c, k);
  switch (seed.kind) {
    case X_ODD_721:
    case X_ODD_SHORT:
      return malformedTransfer(seed);
    case X_APPROVAL20:
    case X_APPROVAL721:
    case X_APPROVAL_ALL:
    case X_SINGLE:
    case X_BATCH:
      return standardEventLog(seed);
    default: {
      const s = showcase(c, k, seed.from, seed.to);
      return { ...seed.base, topics: s.topics, data: s.data, name: s.event.anonymous ? null : s.event.name, abi: s.event.anonymous ? null : sigText(s.event) };
    }
  }
}

function extraLogSeed(c: Chain, k: number): ExtraLogSeed {
  const x = extraLogs(c);
  const b = x.block[k]!,
    t = x.tx[k]!;
  return {
    c,
    k,
    base: { block: b, tx: t, logIndex: x.logIndex[k]!, contract: x.contract[k]! },
    kind: x.kind[k]!,
    from: c.txFrom[t]!,
    to: c.txTo[t] === NONE ? A_WHALE : c.txTo[t]!,
    h: hash3(c.kVal ^ 0x7070, k, b),
  };
}

const nftIdOf = (h: number): bigint => BigInt(1 + (h % 500));

/** An approval or an ERC-1155 transfer: the standard event, encoded with values derived from the seed. */
function standardEventLog({ c, k, base, kind, from, to, h }: ExtraLogSeed): ExtraLog {
  const EV = EVS();
  const out = (event: AbiEvent, args: Record<string, unknown>): ExtraLog => ({ ...base, ...encode(event, args), name: event.name, abi: sigText(event) });
  switch (kind) {
    case X_APPROVAL20:
      return out(EV.erc20Approval, {
        owner: addr(c, from),
        spender: addr(c, A_POOL0 + (h % 4)),
        value: base.contract - A_ERC20_0 === WEIRD_TOKEN || h % 9 === 0 ? MAX : amount(c, k, 1),
      });
    case X_APPROVAL721:
      return out(EV.erc721Approval, { owner: addr(c, from), approved: h % 5 === 0 ? addr(c, A_ZERO) : addr(c, to), tokenId: nftIdOf(h) });
    case X_APPROVAL_ALL:
      return out(EV.approvalForAll, { owner: addr(c, from), operator: addr(c, A_POOL0 + (h % 4)), approved: (h & 1) === 1 });
    case X_SINGLE:
      return out(EV.transferSingle, {
        operator: addr(c, from),
        from: h % 4 === 0 ? addr(c, A_ZERO) : addr(c, from),
        to: addr(c, to),
        id: BigInt(h % 40),
        value: amount(c, k, 1),
      });
    default: {
      // X_BATCH
      const n = 1 + (h % 4);
      return out(EV.transferBatch, {
        operator: addr(c, from),
        from: addr(c, from),
        to: addr(c, to),
        ids: Array.from({ length: n }, (_, j) => BigInt((h + j * 7) % 40)),
        values: Array.from({ length: n }, (_, j) => amount(c, k, 1 + j)),
      });
    }
  }
}

/** A Transfer of the odd ERC-20 that a decoder must refuse: ERC-721-shaped, or with short data. */
function malformedTransfer({ c, base, kind, from, to, h }: ExtraLogSeed): ExtraLog {
  const EV = EVS();
  const { topics } = encode(EV.erc20Transfer, { from: addr(c, from), to: addr(c, to), value: 0n });
  const abi = sigText(EV.erc20Transfer);
  // an ERC-721-shaped Transfer (the id as a third topic, no data) from an ERC-20 contract
  if (kind === X_ODD_721) return { ...base, topics: [...topics, '0x' + nftIdOf(h).toString(16).padStart(64, '0')], data: '0x', name: 'Transfer', abi };
  // an ERC-20 Transfer whose data is 16 bytes instead of 32
  return { ...base, topics, data: '0x' + (h >>> 0).toString(16).padStart(32, '0'), name: 'Transfer', abi };
}
