// ABIs and event signatures, parsed with viem/abitype: a JSON ABI (an item list, or an object holding one
// under `abi`, as compilers and explorers write them), or one event signature as text.

import type { AbiEvent, AbiParameter } from 'viem';
import { ChainlakeError } from '../errors.js';
import { viem } from '../evm/viem.js';
import { duckType } from './types.js';

/** An ABI or event signature that cannot be decoded with. */
export class AbiError extends ChainlakeError {
  constructor(message: string) {
    super(message, { code: 'CHAINLAKE_DECODE_SPEC' });
  }
}

/** The events of a JSON ABI (text or parsed), checked enough to decode with. */
export function eventsOfAbi(abi: unknown, where: string): AbiEvent[] {
  let doc = abi;
  if (typeof doc === 'string') {
    try {
      doc = JSON.parse(doc);
    } catch (e) {
      throw new AbiError(`${where}: not JSON (${(e as Error).message})`);
    }
  }
  if (doc !== null && typeof doc === 'object' && !Array.isArray(doc) && Array.isArray((doc as { abi?: unknown }).abi)) doc = (doc as { abi: unknown }).abi;
  if (!Array.isArray(doc)) throw new AbiError(`${where}: an ABI is a JSON array of items (or an object with one under "abi")`);
  const events: AbiEvent[] = [];
  doc.forEach((item: unknown, i) => {
    if (item === null || typeof item !== 'object' || (item as { type?: unknown }).type !== 'event') return;
    const e = item as AbiEvent;
    if (typeof e.name !== 'string' || !Array.isArray(e.inputs)) throw new AbiError(`${where}[${i}]: an event needs a name and inputs`);
    checkParams(e.inputs, `${where}[${i}] ${e.name}`);
    events.push({ type: 'event', name: e.name, inputs: e.inputs, anonymous: e.anonymous === true });
  });
  return events;
}

function checkParams(params: readonly AbiParameter[], where: string): void {
  for (const p of params) {
    try {
      duckType(p);
    } catch (e) {
      throw new AbiError(`${where}: ${(e as Error).message}`);
    }
  }
}

/**
 * One event from its signature text: `Swap(address indexed sender, uint256 amount0In, …)`, with or without
 * the leading `event`, with a trailing `anonymous` for anonymous events (human-readable ABIs have no word
 * for them). Parameter names are optional (unnamed ones become arg0, arg1, …).
 */
export function eventOfSignature(text: string): AbiEvent {
  let s = text.trim().replace(/;$/, '');
  const anonymous = /\)\s*anonymous$/.test(s);
  if (anonymous) s = s.replace(/\s*anonymous$/, '');
  if (!s.startsWith('event ')) s = `event ${s}`;
  let item: unknown;
  try {
    item = viem().parseAbiItem(s);
  } catch (e) {
    throw new AbiError(`event signature ${JSON.stringify(text)}: ${(e as Error).message.split('\n')[0]}`);
  }
  const e = item as AbiEvent;
  if (e.type !== 'event') throw new AbiError(`event signature ${JSON.stringify(text)}: not an event`);
  checkParams(e.inputs, `event ${e.name}`);
  return { ...e, anonymous };
}

export { selectorOf, signatureText } from '../evm/abi.js';
