// What an explorer handler is given and returns: apart from explorer.ts, which routes to the handlers of
// endpoints.ts, so that the handlers and the page writer (page.ts) name these types without importing it back.

import type { Chain } from './chain.js';
import type { VerifiedRecord } from './contracts.js';
import type { Dialect } from './dialect.js';

export interface ExplorerCtx {
  chain: Chain;
  head: number;
  query: URLSearchParams;
  params: string[];
  body: unknown;
  resultWindow: number;
  state: ExplorerState;
  /** `real`: event logs by address alone, carrying an `id` (src/simulator/dialect.ts). */
  dialect?: Dialect;
  /** The highest block the explorer's index has listed (the head unless it lags: finality.ts). */
  indexed?: number;
}
export interface ExplorerState {
  verified: Map<string, VerifiedRecord>;
}

export interface Results {
  results: string | Buffer;
  rows: number;
  /** The results bytes already hold the whole success envelope (saves a copy on the hot path). */
  enveloped?: boolean;
  /** Called once the results bytes are no longer needed, so their buffer can be reused. */
  release?: () => void;
  /** The envelope's `message`, where a handler says more than the success word (a refused verification's reason). */
  message?: string;
}
export type Handler = (ctx: ExplorerCtx) => Results;
