// The genesis allocation of a simulated chain: the opening balance every address holds before block 0, which no
// listing of the API shows (as on a real chain, whose genesis `alloc` only the chain's genesis file gives). A
// reconciliation of native balances needs it (`chainlake reconcile --genesis FILE`).

import type { Chain } from './chain.js';

/** Every address with a non-zero allocation, lower-case, in wei. */
export function genesisAllocation(c: Chain): Map<string, bigint> {
  const out = new Map<string, bigint>();
  for (let i = 0; i < c.numAddr; i++) {
    const wei = c.genesisWei(i);
    if (wei > 0n) out.set(c.addrLower(i), wei);
  }
  return out;
}

/** The allocations as the genesis file `chainlake reconcile --genesis` reads: {"<network>": {"<address>": "<wei>"}}. */
export function genesisFile(...chains: Chain[]): string {
  const doc: Record<string, Record<string, string>> = {};
  for (const c of chains) {
    const alloc: Record<string, string> = {};
    for (const [a, wei] of genesisAllocation(c)) alloc[a] = wei.toString();
    doc[c.network] = alloc;
  }
  return JSON.stringify(doc);
}
