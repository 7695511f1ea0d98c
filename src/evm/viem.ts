// viem, loaded on first use: importing it costs hundreds of milliseconds (seconds on a loaded machine), which
// every command would pay at startup otherwise; only decoding (and the simulator's token events) need it.

import { createRequire } from 'node:module';

type Viem = typeof import('viem');
let loaded: Viem | undefined;

export function viem(): Viem {
  loaded ??= createRequire(import.meta.url)('viem') as Viem;
  return loaded;
}
