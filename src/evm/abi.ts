// What the pipeline's decoding and the simulator's token events both say of an event: its selector and its
// signature as text, from the same ABI item.

import type { AbiEvent, AbiParameter } from 'viem';
import { viem } from './viem.js';

/** topic_0 of a (non-anonymous) event: keccak256 of its canonical signature. */
export const selectorOf = (e: AbiEvent): string => viem().toEventSelector(e).toLowerCase();

/** `Name(type indexed name, …)` for docs. */
export function signatureText(e: AbiEvent): string {
  const t = (p: AbiParameter): string =>
    p.type.startsWith('tuple') && 'components' in p ? `(${(p.components as readonly AbiParameter[]).map(t).join(', ')})${p.type.slice(5)}` : p.type;
  const params = e.inputs.map((p) => `${t(p)}${(p as { indexed?: boolean }).indexed ? ' indexed' : ''}${p.name ? ` ${p.name}` : ''}`);
  return `${e.name}(${params.join(', ')})${e.anonymous ? ' anonymous' : ''}`;
}
