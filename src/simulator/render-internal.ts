// Byte writer of the internal-transaction entry (#3, #13): the bytes the JSON.stringify of the entry object
// gave before (pinned by test/simulator/golden.test.ts). The trace members (trace_address, trace_type,
// sub_traces) depend only on the trace template, the position in it and the call type, so each combination is
// one literal, built once through JSON.stringify. Callers reserve room per row (page.ts nextRow).

import { Chain, F_FAILED, G, TRACE_SUBS, TRACE_TEMPLATES } from './chain.js';
import { ByteOut, type Lit, lit } from './bytes.js';
import { pad64, word8 } from './hex.js';
import { caseStyle, writeGwei, writeIso } from './render.js';
import { hash2, hash3 } from './rng.js';
import { itxValueGwei, traceTemplate, traceType } from './state.js';

const I = {
  ts: lit('{"timestamp":'),
  sender: lit(',"sender":"'),
  receiver: lit('","receiver":"'),
  value: lit('","value":"'),
  ok: lit('","status":"1","message":null,"transaction_hash":"'),
  failed: lit('","status":"0","message":"execution reverted","transaction_hash":"'),
  bn: lit('","block_number":"'),
  gasUsed: lit('","gas_used":"'),
  gasLimit: lit('","gas_limit":"'),
  external: lit('","external_receiver":true'),
  internal: lit('","external_receiver":false'),
  input: lit(',"input":"'),
};

const TYPES = ['call', 'delegatecall', 'staticcall', 'codecall', 'selfdestruct'];
const MAX_POS = 8; // positions per trace template (the longest has 7)
const traceLits: (Lit | undefined)[] = [];

/** `","contract_address":null,"trace_address":[…],"trace_type":…,"sub_traces":…,"transaction_index":"`. */
function traceLit(tpl: number, pos: number, type: string): Lit {
  const key = (tpl * MAX_POS + pos) * TYPES.length + TYPES.indexOf(type);
  let l = traceLits[key];
  if (l === undefined) {
    const subs = type === 'selfdestruct' ? null : String(TRACE_SUBS[tpl]![pos]!);
    l = lit(
      `","contract_address":null,"trace_address":${JSON.stringify(TRACE_TEMPLATES[tpl]![pos]!.map(String))},"trace_type":${JSON.stringify(type)},"sub_traces":${JSON.stringify(subs)},"transaction_index":"`,
    );
    traceLits[key] = l;
  }
  return l;
}

/** Call data of an internal call (`input=true`): a balanceOf for static calls, a transfer otherwise. */
function internalInput(c: Chain, r: number, type: string): string {
  if (type === 'staticcall') return '0x70a08231' + pad64(c.addrLower(c.itxFrom[r]!).slice(2));
  if (type === 'selfdestruct') return '0x';
  return '0xa9059cbb' + pad64(c.addrLower(c.itxTo[r]!).slice(2)) + word8(hash3(r, 1, 2)).padStart(64, '0');
}

/** The entry of internal transaction r. */
export function writeInternal(out: ByteOut, c: Chain, r: number, withInput: boolean): void {
  const t = c.itxParent[r]!,
    b = c.txBlk[t]!,
    pos = c.itxPos[r]!,
    to = c.itxTo[r]!;
  const tpl = traceTemplate(c, t),
    type = traceType(c, t, tpl, pos);
  const st = caseStyle(c.kTx ^ 0x17, r);
  c.gasOf(t, c.txKind[t]!, b);
  const gasLimit = Math.max(2300, Math.floor(G.limit / (2 + TRACE_TEMPLATES[tpl]![pos]!.length)) - pos * 100);
  const gasUsed = type === 'selfdestruct' ? 5000 : Math.floor(gasLimit * (0.2 + (hash2(r, 3) % 60) / 100));
  out.lit(I.ts);
  writeIso(out, c.blockSeconds(b));
  out.lit(I.sender);
  c.writeAddr(out, c.itxFrom[r]!, st);
  out.lit(I.receiver);
  c.writeAddr(out, to, st);
  out.lit(I.value);
  writeGwei(out, itxValueGwei(c, r));
  out.lit((c.txKind[t]! & F_FAILED) !== 0 ? I.failed : I.ok);
  c.writeTxHash(out, t, st === 2);
  out.lit(I.bn);
  out.uint(b);
  out.lit(traceLit(tpl, pos, type));
  out.uint(t - c.blockFirstTx[b]!);
  out.lit(I.gasUsed);
  out.uint(gasUsed);
  out.lit(I.gasLimit);
  out.uint(gasLimit);
  // An address with no transaction of its own is an external receiver.
  out.lit(c.idxAll.off[to + 1]! - c.idxAll.off[to]! === 0 ? I.external : I.internal);
  if (withInput) {
    out.lit(I.input);
    out.str(internalInput(c, r, type));
    out.byte(34);
  }
  out.byte(125);
}
