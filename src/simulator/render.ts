// Row renderers: each turns a row id into the JSON text of one API entry. String building, not objects:
// every value is a hex/decimal/ISO string or a fixed text, so only free text goes through JSON.stringify.

import {
  A_ERC20_0,
  A_ERC721_0,
  A_STAKING,
  A_ZERO,
  Chain,
  ERC20_META,
  ERC721_META,
  F_FAILED,
  F_MAXVALUE,
  G,
  K_CALL,
  K_CREATE,
  K_ERC20,
  K_ERC721,
  K_MINT20,
  K_MINT721,
  K_TRANSFER,
  N_ERC20,
  N_ERC721,
  WEIRD_TOKEN,
} from './chain.js';
import { hash2, hash3 } from './rng.js';
import { MAX_UINT256, gweiToWei, isoSeconds, pad64, word8 } from './hex.js';
import { ByteOut, type Lit, lit } from './bytes.js';

export const MINING_REWARD_GWEI = 2_000_000_000; // 2 coins

/** Per-row letter case: 0 lower, 1 EIP-55 checksum, 2 upper. Deterministic per (kind of row, id). */
export function caseStyle(salt: number, id: number): number {
  const r = hash2(salt ^ 0x00ca5e00, id) & 7;
  return r < 4 ? 0 : r < 7 ? 1 : 2;
}
export function hashCase(h: string, style: number): string {
  return style === 2 ? '0x' + h.slice(2).toUpperCase() : h;
}

let isoCacheKey = -1,
  isoCacheVal = '';
export function blockIso(c: Chain, b: number): string {
  const s = c.blockSeconds(b);
  if (s !== isoCacheKey) {
    isoCacheKey = s;
    isoCacheVal = isoSeconds(s);
  }
  return isoCacheVal;
}

const q = (s: string | null): string => (s === null ? 'null' : '"' + s + '"');

export function txMessage(c: Chain, t: number, kb: number): string | null {
  if (!(kb & F_FAILED)) return null;
  if (kb & F_MAXVALUE) return 'insufficient funds for transfer';
  const k = kb & 15;
  if (k === K_CALL) {
    if (G.used === G.limit) return 'out of gas';
    const r = hash2(c.kVal ^ 0x3e55, t) % 3;
    return r === 0 ? 'execution reverted' : r === 1 ? 'execution reverted: INSUFFICIENT_OUTPUT_AMOUNT' : 'execution reverted: STF';
  }
  if (k === K_ERC20) return 'execution reverted: ERC20: transfer amount exceeds balance';
  if (k === K_ERC721) return 'execution reverted: ERC721: caller is not token owner or approved';
  if (k === K_MINT20) return 'execution reverted: Pausable: paused';
  if (k === K_MINT721) return 'execution reverted: max supply reached';
  return 'execution reverted';
}

export function tokenAmount(tk: number, units: number): string {
  if (tk === WEIRD_TOKEN) return units === 0 ? '0' : MAX_UINT256;
  const d = ERC20_META[tk]!.decimals!;
  if (units === 0) return '0';
  return d < 2 ? String(units) : String(units) + '0'.repeat(d - 2);
}

export function tokenAmountHex(tk: number, units: number): string {
  if (tk === WEIRD_TOKEN) return units === 0 ? pad64('0') : 'f'.repeat(64);
  return pad64(BigInt(tokenAmount(tk, units)).toString(16));
}

function hexWords(seed: number, n: number): string {
  let s = '';
  for (let i = 0; i < n; i++) s += word8(hash3(seed, 0x1f, i));
  return s;
}

export function txInput(c: Chain, t: number): string {
  const kb = c.txKind[t]!,
    k = kb & 15;
  const from = c.txFrom[t]!,
    to = c.txTo[t]!;
  const addrWord = (a: number): string => '000000000000000000000000' + c.addrLower(a).slice(2);
  const [l0, l1] = c.logsOfTx(t);
  switch (k) {
    case K_TRANSFER:
      return '0x';
    case K_ERC20: {
      const tk = to - A_ERC20_0;
      if (l1 > l0) return '0xa9059cbb' + addrWord(c.logTo[l0]!) + tokenAmountHex(tk, c.logAmt[l0]!);
      return '0xa9059cbb' + addrWord(c.createdEnd + (hash2(t, 5) % c.preset.ordinary)) + pad64((hash2(t, 6) % 1e9).toString(16));
    }
    case K_MINT20:
      return '0x1249c58b';
    case K_ERC721: {
      const id = l1 > l0 ? c.logAmt[l0]! : hash2(t, 7) % 1000;
      return '0x23b872dd' + addrWord(from) + addrWord(l1 > l0 ? c.logTo[l0]! : from) + tokenIdHex(c, to - A_ERC721_0, id);
    }
    case K_MINT721:
      return '0x6a627842' + addrWord(from);
    case K_CALL:
      if (to === A_STAKING) return '0xe2bbb158' + pad64(String(hash2(t, 8) % 2)) + hexWords(t, 8);
      return '0x38ed1739' + hexWords(t, 40) + addrWord(from) + hexWords(t ^ 0x55, 24);
    case K_CREATE:
      return '0x608060405234801561001057600080fd5b50' + hexWords(t, 48 + (hash2(t, 9) % 64));
  }
  return '0x';
}

export function tokenIdString(c: Chain, nft: number, idx: number): string {
  if (nft === 1) return String(1_000_000 + idx); // land parcels carry large ids
  if (nft === 3) return BigInt('0x' + word8(hash3(c.kVal, nft, idx)) + word8(hash3(c.kVal, nft, idx + 1)) + word8(idx)).toString();
  return String(idx + 1);
}
export function tokenIdHex(c: Chain, nft: number, idx: number): string {
  return pad64(BigInt(tokenIdString(c, nft, idx)).toString(16));
}
export function tokenUri(c: Chain, nft: number, idx: number): string | null {
  if (nft === 2) return null;
  if (hash2(c.kVal ^ nft, idx) % 11 === 0) return null;
  return nft === 0
    ? `ipfs://bafybeichainpunks${word8(c.kVal)}/${idx + 1}.json`
    : `https://meta.example.org/${ERC721_META[nft]!.symbol!.toLowerCase()}/${tokenIdString(c, nft, idx)}`;
}

const dayCache = new Map<number, Lit>();
let lastDay = -1,
  lastDayLit: Lit | undefined;
/** `"YYYY-MM-DDTHH:MM:SSZ"` with quotes. */
export function writeIso(out: ByteOut, sec: number): void {
  const day = Math.floor(sec / 86400);
  if (day !== lastDay) {
    let d = dayCache.get(day);
    if (d === undefined) {
      d = lit('"' + new Date(day * 86_400_000).toISOString().slice(0, 11));
      dayCache.set(day, d);
    }
    lastDay = day;
    lastDayLit = d;
  }
  out.lit(lastDayLit!);
  const r = sec - day * 86400;
  const hh = Math.floor(r / 3600),
    mm = Math.floor((r % 3600) / 60),
    ss = r % 60;
  const buf = out.buf;
  let p = out.pos;
  buf[p++] = 48 + Math.floor(hh / 10);
  buf[p++] = 48 + (hh % 10);
  buf[p++] = 58;
  buf[p++] = 48 + Math.floor(mm / 10);
  buf[p++] = 48 + (mm % 10);
  buf[p++] = 58;
  buf[p++] = 48 + Math.floor(ss / 10);
  buf[p++] = 48 + (ss % 10);
  buf[p++] = 90;
  buf[p++] = 34;
  out.pos = p;
}

// The keys and fixed values of a transaction row, merged wherever consecutive parts depend only on the row's
// kind (status, creation, legacy gas), so a row is ~20 literal writes of 32-bit stores.
const B = {
  ts: lit('{"timestamp":'),
  nonce: lit(',"nonce":"'),
  sender: lit('","sender":"'),
  receiver: lit('","receiver":"'),
  valueAfterAddr: lit('","value":"'),
  receiverNullValue: lit('","receiver":null,"value":"'),
  conf: lit('","confirmations":"'),
  txh: lit('","transaction_hash":"'),
  bh: lit('","block_hash":"'),
  tidx: lit('","transaction_index":"'),
  okCall: lit('","tx_status":"1","tx_message":null,"in_tx_status":"1","in_tx_message":null,"tx_fee":"'),
  okOther: lit('","tx_status":"1","tx_message":null,"in_tx_status":null,"in_tx_message":null,"tx_fee":"'),
  failHead: lit('","tx_status":"0","tx_message":'),
  failCall: lit(',"in_tx_status":"0","in_tx_message":"execution reverted","tx_fee":"'),
  failOther: lit(',"in_tx_status":null,"in_tx_message":null,"tx_fee":"'),
  bn: lit('","block_number":"'),
  caNull: lit('","contract_address":null,"gas_limit":"'),
  ca: lit('","contract_address":"'),
  glAfterAddr: lit('","gas_limit":"'),
  gp: lit('","gas_price":"'),
  cgu: lit('","cumulative_gas_used":"'),
  gu: lit('","gas_used":"'),
  legacy: lit('","max_fee_per_gas":null,"max_priority_fee_per_gas":null'),
  mf: lit('","max_fee_per_gas":"'),
  mp: lit('","max_priority_fee_per_gas":"'),
  input: lit(',"input":"'),
  gwei: lit('000000000'),
  max: lit(MAX_UINT256),
  sSender: lit('{"sender":"'),
  sReceiver: lit('","receiver":"'),
  sTxhAfterAddr: lit('","transaction_hash":"'),
  sReceiverNullTxh: lit('","receiver":null,"transaction_hash":"'),
  st: lit('","tx_status":"'),
  sFee: lit('","tx_fee":"'),
  sGu: lit('","gas_used":"'),
};

/** A whole number of gwei as wei digits (gweiToWei). */
export function writeGwei(out: ByteOut, g: number): void {
  if (g === 0) {
    out.byte(48);
    return;
  }
  out.uint(g);
  out.lit(B.gwei);
}

/**
 * The full transaction entry (endpoint #2), written as bytes. The steps take the row's facts as arguments, not
 * an object: this runs once per row of every transaction page, the simulator's hottest path (its bench).
 */
export function writeTx(out: ByteOut, c: Chain, t: number, head: number, withInput: boolean): void {
  const b = c.txBlk[t]!,
    kb = c.txKind[t]!;
  const st = caseStyle(c.kTx, t);
  c.gasOf(t, kb, b);
  out.ensure(2048);
  writeTxParties(out, c, t, b, kb, st);
  writeTxPlace(out, c, t, b, head, st);
  writeTxOutcome(out, c, t, kb);
  writeTxGas(out, c, t, b, kb, st);
  if (withInput) writeTxInput(out, c, t);
  out.byte(125);
}

/** timestamp, nonce, sender, receiver (null for a creation) and value. */
function writeTxParties(out: ByteOut, c: Chain, t: number, b: number, kb: number, st: number): void {
  out.lit(B.ts);
  writeIso(out, c.blockSeconds(b));
  out.lit(B.nonce);
  out.uint(c.nonceOf(t));
  out.lit(B.sender);
  c.writeAddr(out, c.txFrom[t]!, st);
  if ((kb & 15) === K_CREATE) out.lit(B.receiverNullValue);
  else {
    out.lit(B.receiver);
    c.writeAddr(out, c.txTo[t]!, st);
    out.lit(B.valueAfterAddr);
  }
  if (kb & F_MAXVALUE) out.lit(B.max);
  else writeGwei(out, c.valueGwei(t, kb));
}

/** confirmations at `head`, the transaction's and its block's hashes, its index in the block. */
function writeTxPlace(out: ByteOut, c: Chain, t: number, b: number, head: number, st: number): void {
  const up = st === 2;
  out.lit(B.conf);
  out.uint(head - b + 1);
  out.lit(B.txh);
  c.writeTxHash(out, t, up);
  out.lit(B.bh);
  c.writeBlockHash(out, b, up);
  out.lit(B.tidx);
  out.uint(t - c.blockFirstTx[b]!);
}

/** tx and in-tx status and message (an inner status for calls only), and the fee (G, set by gasOf). */
function writeTxOutcome(out: ByteOut, c: Chain, t: number, kb: number): void {
  const k = kb & 15;
  if ((kb & F_FAILED) === 0) out.lit(k === K_CALL ? B.okCall : B.okOther);
  else {
    out.lit(B.failHead);
    out.str(JSON.stringify(txMessage(c, t, kb)));
    out.lit(k === K_CALL ? B.failCall : B.failOther);
  }
  writeGwei(out, G.used * G.price);
}

/** block number, the created contract's address, and the gas fields (fee caps null for a legacy transaction). */
function writeTxGas(out: ByteOut, c: Chain, t: number, b: number, kb: number, st: number): void {
  out.lit(B.bn);
  out.uint(b);
  if ((kb & 15) === K_CREATE) {
    out.lit(B.ca);
    c.writeAddr(out, c.txTo[t]!, st);
    out.lit(B.glAfterAddr);
  } else out.lit(B.caNull);
  out.uint(G.limit);
  out.lit(B.gp);
  writeGwei(out, G.price);
  out.lit(B.cgu);
  out.uint(c.txCumGas[t]!);
  out.lit(B.gu);
  out.uint(G.used);
  if (G.legacy) out.lit(B.legacy);
  else {
    out.lit(B.mf);
    writeGwei(out, G.maxFee);
    out.lit(B.mp);
    writeGwei(out, G.prio);
    out.byte(34);
  }
}

/** `,"input":"…"`, asked for with `input=true` (full and simple entries alike). */
function writeTxInput(out: ByteOut, c: Chain, t: number): void {
  out.lit(B.input);
  out.str(txInput(c, t));
  out.byte(34);
}

/** Simple-mode entry as bytes. */
export function writeTxSimple(out: ByteOut, c: Chain, t: number, withInput: boolean): void {
  const b = c.txBlk[t]!,
    kb = c.txKind[t]!,
    k = kb & 15;
  const st = caseStyle(c.kTx, t);
  c.gasOf(t, kb, b);
  out.ensure(1024);
  out.lit(B.sSender);
  c.writeAddr(out, c.txFrom[t]!, st);
  if (k === K_CREATE) out.lit(B.sReceiverNullTxh);
  else {
    out.lit(B.sReceiver);
    c.writeAddr(out, c.txTo[t]!, st);
    out.lit(B.sTxhAfterAddr);
  }
  c.writeTxHash(out, t, st === 2);
  out.lit(B.st);
  out.byte(kb & F_FAILED ? 48 : 49);
  out.lit(B.sFee);
  writeGwei(out, G.used * G.price);
  out.lit(B.bn);
  out.uint(b);
  out.lit(B.gp);
  writeGwei(out, G.price);
  out.lit(B.cgu);
  out.uint(c.txCumGas[t]!);
  out.lit(B.sGu);
  out.uint(G.used);
  out.byte(34);
  if (withInput) writeTxInput(out, c, t);
  out.byte(125);
}

/** The full transaction entry (endpoint #2): the plain-string form writeTx's bytes are checked against. */
export function renderTx(c: Chain, t: number, head: number, withInput: boolean): string {
  const kb = c.txKind[t]!;
  const st = caseStyle(c.kTx, t);
  c.gasOf(t, kb, c.txBlk[t]!);
  let s = txPartiesAndPlace(c, t, head, kb, st) + txOutcome(c, t, kb) + txGas(c, t, kb, st);
  if (withInput) s += ',"input":"' + txInput(c, t) + '"';
  return s + '}';
}

/** From `{"timestamp"` to transaction_index: who, how much, where in the chain. */
function txPartiesAndPlace(c: Chain, t: number, head: number, kb: number, st: number): string {
  const b = c.txBlk[t]!;
  const from = c.addrCase(c.txFrom[t]!, st);
  const to = (kb & 15) === K_CREATE ? null : c.addrCase(c.txTo[t]!, st);
  const value = kb & F_MAXVALUE ? MAX_UINT256 : gweiToWei(c.valueGwei(t, kb));
  return (
    '{"timestamp":"' +
    blockIso(c, b) +
    '","nonce":"' +
    c.nonceOf(t) +
    '","sender":"' +
    from +
    '","receiver":' +
    q(to) +
    ',"value":"' +
    value +
    '","confirmations":"' +
    (head - b + 1) +
    '","transaction_hash":"' +
    hashCase(c.txHash(t), st) +
    '","block_hash":"' +
    hashCase(c.blockHash(b), st) +
    '","transaction_index":"' +
    (t - c.blockFirstTx[b]!)
  );
}

/** tx_status to tx_fee: the outcome, with an inner status and message for calls only. */
function txOutcome(c: Chain, t: number, kb: number): string {
  const k = kb & 15;
  const failed = (kb & F_FAILED) !== 0;
  const msg = txMessage(c, t, kb);
  const inStatus = k === K_CALL ? (failed ? '0' : '1') : null;
  const inMsg = k === K_CALL && failed ? 'execution reverted' : null;
  return (
    '","tx_status":"' +
    (failed ? '0' : '1') +
    '","tx_message":' +
    (msg === null ? 'null' : JSON.stringify(msg)) +
    ',"in_tx_status":' +
    q(inStatus) +
    ',"in_tx_message":' +
    q(inMsg) +
    ',"tx_fee":"' +
    gweiToWei(G.used * G.price)
  );
}

/** block_number to max_priority_fee_per_gas: the created contract and the gas (G, set by gasOf). */
function txGas(c: Chain, t: number, kb: number, st: number): string {
  const created = (kb & 15) === K_CREATE ? c.addrCase(c.txTo[t]!, st) : null;
  return (
    '","block_number":"' +
    c.txBlk[t]! +
    '","contract_address":' +
    q(created) +
    ',"gas_limit":"' +
    G.limit +
    '","gas_price":"' +
    gweiToWei(G.price) +
    '","cumulative_gas_used":"' +
    c.txCumGas[t]! +
    '","gas_used":"' +
    G.used +
    '","max_fee_per_gas":' +
    (G.legacy ? 'null' : '"' + gweiToWei(G.maxFee) + '"') +
    ',"max_priority_fee_per_gas":' +
    (G.legacy ? 'null' : '"' + gweiToWei(G.prio) + '"')
  );
}

/** Simple-mode transaction entry (S fields; to_block/from_block go to `results`). */
export function renderTxSimple(c: Chain, t: number, withInput: boolean): string {
  const b = c.txBlk[t]!,
    kb = c.txKind[t]!,
    k = kb & 15;
  const st = caseStyle(c.kTx, t);
  c.gasOf(t, kb, b);
  const to = k === K_CREATE ? null : c.addrCase(c.txTo[t]!, st);
  let s =
    '{"sender":"' +
    c.addrCase(c.txFrom[t]!, st) +
    '","receiver":' +
    q(to) +
    ',"transaction_hash":"' +
    hashCase(c.txHash(t), st) +
    '","tx_status":"' +
    (kb & F_FAILED ? '0' : '1') +
    '","tx_fee":"' +
    gweiToWei(G.used * G.price) +
    '","block_number":"' +
    b +
    '","gas_price":"' +
    gweiToWei(G.price) +
    '","cumulative_gas_used":"' +
    c.txCumGas[t]! +
    '","gas_used":"' +
    G.used +
    '"';
  if (withInput) s += ',"input":"' + txInput(c, t) + '"';
  return s + '}';
}

export function blockFees(c: Chain, b: number): number {
  return c.blockFeeGwei[b]!;
}

export function renderBlock(c: Chain, b: number): string {
  const miner = c.addrCase(2 + c.minerOf[b]!, caseStyle(c.kBlock, b));
  const fees = b === 0 ? 0 : c.blockFeeGwei[b]!;
  const reward = b === 0 ? 0 : MINING_REWARD_GWEI + fees;
  return (
    '{"timestamp":"' +
    blockIso(c, b) +
    '","miner":' +
    (b === 0 ? q(c.addrLower(A_ZERO)) : '"' + miner + '"') +
    ',"reward":"' +
    gweiToWei(reward) +
    '","fees":"' +
    gweiToWei(fees) +
    '","block_number":"' +
    b +
    '","mining_reward":"' +
    gweiToWei(b === 0 ? 0 : MINING_REWARD_GWEI) +
    '"}'
  );
}

export { N_ERC20, N_ERC721, A_ERC721_0, K_ERC721 };
