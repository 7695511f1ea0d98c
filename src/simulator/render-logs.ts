// Byte writers of the entries derived from log rows: the event log (#18), the ERC-20 / ERC-721 transfer (#4, #5)
// and the ERC-721 group's long transfer (#25). They write the bytes the JSON.stringify of the entry objects
// gave before (pinned by test/simulator/golden.test.ts), without building an object or a string per entry:
// everything that depends only on a log's kind and contract (names, ABI text, method, topic_0, token
// metadata) is merged with the keys around it into a literal built once, through JSON.stringify of the same
// values; per-row values are hex words, digits and cached EIP-55 addresses. Callers reserve room per row
// (page.ts nextRow).

import {
  A_ERC20_0,
  A_ERC721_0,
  A_POOL0,
  A_STAKING,
  A_ZERO,
  Chain,
  ERC20_META,
  ERC721_META,
  G,
  L_DEPOSIT,
  L_ERC20,
  L_ERC721,
  L_SWAP,
  L_UNNAMED,
  N_ERC20,
  N_ERC721,
  N_POOLS,
  WEIRD_TOKEN,
} from './chain.js';
import {
  ABI_TEXT_DEPOSIT,
  ABI_TEXT_SWAP,
  ABI_TEXT_TRANSFER,
  ABI_TEXT_TRANSFER721,
  TOPIC_DEPOSIT,
  TOPIC_SWAP,
  TOPIC_TRANSFER,
  unnamedTopic,
} from './contracts.js';
import { ByteOut, type Lit, lit } from './bytes.js';
import { MAX_UINT256, pad64 } from './hex.js';
import { caseStyle, tokenIdString, tokenUri, writeGwei, writeIso } from './render.js';
import { hash2, hash3 } from './rng.js';

const json = (v: string | null): string => JSON.stringify(v);
/** `0x` and the 24 zeros of an address as a 256-bit word (an indexed address topic). */
const ADDR_WORD = '0x' + '0'.repeat(24);

// ---- token metadata ---------------------------------------------------------------------------------------

export interface TokenStrings {
  name: string | null;
  symbol: string | null;
  decimals: string | null;
}

const isToken = (i: number): boolean => (i >= A_ERC20_0 && i < A_ERC20_0 + N_ERC20) || (i >= A_ERC721_0 && i < A_ERC721_0 + N_ERC721);

/** Name, symbol and decimals (as text) of a token contract; all null for other contracts. */
export function tokenMeta(contract: number): TokenStrings {
  if (!isToken(contract)) return { name: null, symbol: null, decimals: null };
  const m = contract < A_ERC721_0 ? ERC20_META[contract - A_ERC20_0]! : ERC721_META[contract - A_ERC721_0]!;
  return { name: m.name, symbol: m.symbol, decimals: m.decimals === null ? null : String(m.decimals) };
}

const metaTails: (Lit | undefined)[] = [];
/** `,"token_name":…,"token_symbol":…,"token_decimals":…,"transaction_index":"` of a contract. */
function metaTail(contract: number): Lit {
  let l = metaTails[contract];
  if (l === undefined) {
    const m = tokenMeta(contract);
    l = lit(`,"token_name":${json(m.name)},"token_symbol":${json(m.symbol)},"token_decimals":${json(m.decimals)},"transaction_index":"`);
    metaTails[contract] = l;
  }
  return l;
}

// ---- 256-bit words --------------------------------------------------------------------------------------------

const ZERO40 = lit('0'.repeat(40)),
  ZERO48 = lit('0'.repeat(48)),
  ZERO56 = lit('0'.repeat(56));
const ZERO64 = lit('0'.repeat(64)),
  F64 = lit('f'.repeat(64));
const POW10 = [1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7];
const LIMB = 0x1000000;
const limbs = new Float64Array(11); // 11 base-2^24 limbs cover 264 bits, least significant first

/**
 * The 64 hex digits of units * 10^k (units < 2^32; tokenAmountHex without BigInt). The product is built in
 * base-2^24 limbs, multiplied by at most 10^7 at a time, so every partial product stays exact in a double.
 */
function writeScaledHex64(out: ByteOut, units: number, k: number): void {
  limbs.fill(0);
  limbs[0] = units % LIMB;
  limbs[1] = Math.floor(units / LIMB);
  for (let rest = k; rest > 0; rest -= 7) {
    const m = POW10[Math.min(rest, 7)]!;
    let carry = 0;
    for (let i = 0; i < limbs.length; i++) {
      const v = limbs[i]! * m + carry;
      carry = Math.floor(v / LIMB);
      limbs[i] = v - carry * LIMB;
    }
  }
  // Byte j (0 = least significant) is byte j % 3 of limb j / 3.
  for (let j = 31; j >= 0; j--) out.hex2((limbs[(j / 3) | 0]! >>> (8 * (j % 3))) & 255);
}

/** The `data` word of an ERC-20 Transfer log: the amount in base units as 64 hex digits (tokenAmountHex). */
export function writeAmountHex(out: ByteOut, tk: number, units: number): void {
  if (tk === WEIRD_TOKEN) {
    out.lit(units === 0 ? ZERO64 : F64);
    return;
  }
  const d = ERC20_META[tk]!.decimals!;
  writeScaledHex64(out, units, d < 2 ? 0 : d - 2);
}

const MAX_AMOUNT = lit(MAX_UINT256);
/** The amount in base units as decimal digits (tokenAmount: units are hundredths of a token, whole tokens at 0 decimals). */
export function writeAmount(out: ByteOut, tk: number, units: number): void {
  if (units === 0) {
    out.byte(48);
    return;
  }
  if (tk === WEIRD_TOKEN) {
    out.lit(MAX_AMOUNT);
    return;
  }
  out.uint(units);
  for (let z = ERC20_META[tk]!.decimals! - 2; z > 0; z--) out.byte(48);
}

/** An NFT's token id as 64 hex digits (tokenIdHex: the same ids as tokenIdString). */
export function writeTokenIdHex(out: ByteOut, c: Chain, nft: number, idx: number): void {
  if (nft === 3) {
    // a 96-bit id from two hash words and the index
    out.lit(ZERO40);
    out.word(hash3(c.kVal, nft, idx), false);
    out.word(hash3(c.kVal, nft, idx + 1), false);
    out.word(idx, false);
    return;
  }
  const id = nft === 1 ? 1_000_000 + idx : idx + 1;
  out.lit(ZERO48);
  out.word(Math.floor(id / 0x100000000), false);
  out.word(id >>> 0, false);
}

// ---- event logs (#18) -------------------------------------------------------------------------------------

/** The literals of one (contract, log kind): the constant parts of its entries. */
interface LogShape {
  /** `","method":"0x…","transaction_hash":"` for a token mint (from the zero address) and for other logs. */
  mintMethod: Lit;
  method: Lit;
  /** From the end of the transaction hash up to the value of transaction_index. */
  middle: Lit;
  /** From the end of log_index up to the first per-row topic byte, or to the row's end (unnamed logs). */
  topics: Lit;
}

const METHODS: Record<number, [mint: string, other: string]> = {
  [L_ERC20]: ['0x1249c58b', '0xa9059cbb'],
  [L_ERC721]: ['0x6a627842', '0x23b872dd'],
  [L_SWAP]: ['0x38ed1739', '0x38ed1739'],
  [L_DEPOSIT]: ['0xe2bbb158', '0xe2bbb158'],
  [L_UNNAMED]: ['0x38ed1739', '0x38ed1739'],
};
const NAMES: Record<number, [name: string, abi: string] | null> = {
  [L_ERC20]: ['Transfer', ABI_TEXT_TRANSFER],
  [L_ERC721]: ['Transfer', ABI_TEXT_TRANSFER721],
  [L_SWAP]: ['Swap', ABI_TEXT_SWAP],
  [L_DEPOSIT]: ['Deposit', ABI_TEXT_DEPOSIT],
  [L_UNNAMED]: null,
};
const N_KINDS = 5;

/** topic_0 of a log of this kind emitted by this contract. */
export function topic0Of(c: Chain, kind: number, contract: number): string {
  return kind === L_ERC20 || kind === L_ERC721 ? TOPIC_TRANSFER : kind === L_SWAP ? TOPIC_SWAP : kind === L_DEPOSIT ? TOPIC_DEPOSIT : unnamedTopic(c, contract);
}

function addressExtra(contract: number): string | null {
  if (isToken(contract)) return tokenMeta(contract).name;
  if (contract === A_STAKING) return 'Staking Pool';
  if (contract >= A_POOL0 && contract < A_POOL0 + N_POOLS) return `Swap Pair ${contract - A_POOL0}`;
  return null;
}

function logShape(c: Chain, contract: number, kind: number): LogShape {
  const [mint, other] = METHODS[kind]!;
  const nm = NAMES[kind]!;
  const topicsCount = kind === L_ERC721 ? 4 : kind === L_UNNAMED ? 1 : 3;
  const head = `","topics_count":"${topicsCount}","topic_0":${json(topic0Of(c, kind, contract))}`;
  return {
    mintMethod: lit(`","method":${json(mint)},"transaction_hash":"`),
    method: lit(`","method":${json(other)},"transaction_hash":"`),
    middle: lit(
      `","log_name":${json(nm ? nm[0] : null)},"log_abi":${json(nm ? nm[1] : null)},"address_type":"contract","address_extra":${json(addressExtra(contract))},"transaction_index":"`,
    ),
    // Every kind but the unnamed one has the sender's address word as topic_1 (the zero address for mints).
    topics: lit(kind === L_UNNAMED ? head + ',"topic_1":null,"topic_2":null,"topic_3":null}' : head + `,"topic_1":"${ADDR_WORD}`),
  };
}

/** The log shapes of a chain, by contract * N_KINDS + kind, filled as used (the unnamed topic_0 is per chain). */
export type LogShapes = (LogShape | undefined)[];
const shapesByChain = new Map<number, LogShapes>();
export function logShapes(c: Chain): LogShapes {
  let s = shapesByChain.get(c.uid);
  if (s === undefined) {
    s = [];
    shapesByChain.set(c.uid, s);
  }
  return s;
}

const L = {
  ts: lit('{"timestamp":'),
  id: lit('{"id":"'),
  sequenceAfterId: lit('","sequence":1'),
  tsAfterSequence: lit(',"timestamp":'),
  address: lit(',"address":"'),
  data: lit('","data":"0x'),
  logIndex: lit('","log_index":"'),
  topic2: lit(`","topic_2":"${ADDR_WORD}`),
  topic2Word: lit('","topic_2":"0x'),
  topic3Null: lit('","topic_3":null}'),
  topic3: lit('","topic_3":"0x'),
};

/** The event-log entry of log r. */
export function writeLog(out: ByteOut, c: Chain, r: number, shapes: LogShapes, withId = false): void {
  const t = c.logTx[r]!,
    b = c.txBlk[t]!,
    kind = c.logKind[r]!,
    contract = c.logContract[r]!;
  const st = caseStyle(c.kTx ^ 0x18, r);
  const shape = (shapes[contract * N_KINDS + kind] ??= logShape(c, contract, kind));
  // The real dialect's entries carry the service's own id of the log and a sequence number, fields the spec
  // does not list; the sequence is a JSON number beyond 2^53 (1 followed by 17 digits), which a double rounds.
  if (withId) {
    out.lit(L.id);
    out.uint(r + 1);
    out.lit(L.sequenceAfterId);
    out.str(String(r + 1).padStart(17, '0'));
    out.lit(L.tsAfterSequence);
  } else out.lit(L.ts);
  writeIso(out, c.blockSeconds(b));
  out.lit(L.address);
  c.writeAddr(out, contract, st);
  out.lit(L.data);
  writeLogData(out, c, r, kind, contract);
  out.lit(c.logFrom[r] === A_ZERO ? shape.mintMethod : shape.method);
  c.writeTxHash(out, t, st === 2);
  out.lit(shape.middle);
  out.uint(t - c.blockFirstTx[b]!);
  out.lit(L.logIndex);
  out.uint(r - c.blockFirstLog[b]!);
  out.lit(shape.topics);
  if (kind !== L_UNNAMED) writeLogTopics(out, c, r, kind);
}

/** The hex digits of a log's `data` after its 0x. */
function writeLogData(out: ByteOut, c: Chain, r: number, kind: number, contract: number): void {
  switch (kind) {
    case L_ERC20:
      writeAmountHex(out, contract - A_ERC20_0, c.logAmt[r]!);
      return;
    case L_ERC721:
      return;
    case L_SWAP:
      for (let j = 1; j <= 4; j++) {
        out.lit(ZERO56);
        out.word(hash3(r, 0x5a, j), false);
      }
      return;
    case L_DEPOSIT:
      out.lit(ZERO56);
      out.word(hash2(r, 0xde), false);
      return;
    default:
      out.lit(ZERO56);
      out.word(hash2(r, 0xaa), false);
      out.lit(ZERO56);
      out.word(hash2(r, 0xab), false);
  }
}

/** topic_1 (after its zero padding) to the end of the row, for every kind but the unnamed one. */
function writeLogTopics(out: ByteOut, c: Chain, r: number, kind: number): void {
  c.writeAddrHex(out, c.logFrom[r]!, false);
  if (kind === L_DEPOSIT) {
    // topic_2 is the pool id, padded as decimal text (both ids are single digits)
    out.lit(L.topic2Word);
    out.str(pad64(String(c.logAmt[r]!)));
    out.lit(L.topic3Null);
    return;
  }
  out.lit(L.topic2);
  c.writeAddrHex(out, c.logTo[r]!, false);
  if (kind !== L_ERC721) {
    out.lit(L.topic3Null);
    return;
  }
  out.lit(L.topic3);
  writeTokenIdHex(out, c, c.logContract[r]! - A_ERC721_0, c.logAmt[r]!);
  out.byte(34);
  out.byte(125);
}

// ---- token transfers (#4, #5) and the ERC-721 group's transfers (#25) ---------------------------------------

const T = {
  ts: lit('{"timestamp":'),
  sender: lit(',"sender":"'),
  receiver: lit('","receiver":"'),
  value: lit('","value":"'),
  conf: lit('","confirmations":"'),
  bn: lit('","block_number":"'),
  txh: lit('","transaction_hash":"'),
  bh: lit('","block_hash":"'),
  token: lit('","token_address":"'),
  nonce: lit('{"nonce":"'),
  nonceTs: lit('","timestamp":'),
  standardBn: lit('","standard":"ERC-721","block_number":"'),
  tokenId: lit('","token_id":"'),
  tokenUri: lit('","token_uri":'),
  gasLimit: lit('","gas_limit":"'),
  gasPrice: lit('","gas_price":"'),
  gasUsed: lit('","gas_used":"'),
  cumGas: lit('","cumulative_gas_used":"'),
};

/** The token-transfer entry of Transfer log r; `withValue` for ERC-20 (ERC-721 entries have no value). */
export function writeTransfer(out: ByteOut, c: Chain, r: number, head: number, withValue: boolean): void {
  const t = c.logTx[r]!,
    b = c.txBlk[t]!,
    contract = c.logContract[r]!;
  const st = caseStyle(c.kTx ^ 0x20, r),
    up = st === 2;
  out.lit(T.ts);
  writeIso(out, c.blockSeconds(b));
  out.lit(T.sender);
  c.writeAddr(out, c.logFrom[r]!, st);
  out.lit(T.receiver);
  c.writeAddr(out, c.logTo[r]!, st);
  if (withValue) {
    out.lit(T.value);
    writeAmount(out, contract - A_ERC20_0, c.logAmt[r]!);
  }
  out.lit(T.conf);
  out.uint(head - b + 1);
  out.lit(T.bn);
  out.uint(b);
  out.lit(T.txh);
  c.writeTxHash(out, t, up);
  out.lit(T.bh);
  c.writeBlockHash(out, b, up);
  out.lit(T.token);
  c.writeAddr(out, contract, st);
  out.byte(34);
  out.lit(metaTail(contract));
  out.uint(t - c.blockFirstTx[b]!);
  out.byte(34);
  out.byte(125);
}

/** The ERC-721 group's transfer entry of Transfer log r (rare: ids and URIs go through their string forms). */
export function writeNftTransfer(out: ByteOut, c: Chain, r: number, head: number): void {
  const t = c.logTx[r]!,
    b = c.txBlk[t]!,
    contract = c.logContract[r]!,
    nft = contract - A_ERC721_0;
  const st = caseStyle(c.kTx ^ 0x21, r),
    up = st === 2;
  c.gasOf(t, c.txKind[t]!, b);
  out.lit(T.nonce);
  out.uint(c.nonceOf(t));
  out.lit(T.nonceTs);
  writeIso(out, c.blockSeconds(b));
  out.lit(T.sender);
  c.writeAddr(out, c.logFrom[r]!, st);
  out.lit(T.receiver);
  c.writeAddr(out, c.logTo[r]!, st);
  out.lit(T.conf);
  out.uint(head - b + 1);
  out.lit(T.standardBn);
  out.uint(b);
  out.lit(T.txh);
  c.writeTxHash(out, t, up);
  out.lit(T.bh);
  c.writeBlockHash(out, b, up);
  out.lit(T.token);
  c.writeAddr(out, contract, st);
  out.lit(T.tokenId);
  out.str(tokenIdString(c, nft, c.logAmt[r]!));
  out.lit(T.tokenUri);
  out.str(json(tokenUri(c, nft, c.logAmt[r]!)));
  out.lit(metaTail(contract));
  out.uint(t - c.blockFirstTx[b]!);
  out.lit(T.gasLimit);
  out.uint(G.limit);
  out.lit(T.gasPrice);
  writeGwei(out, G.price);
  out.lit(T.gasUsed);
  out.uint(G.used);
  out.lit(T.cumGas);
  out.uint(c.txCumGas[t]!);
  out.byte(34);
  out.byte(125);
}
