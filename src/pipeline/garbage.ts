import { drainBodyPool } from '../extract/body-pool.js';
/** A full garbage collection, asked for at the points where a run leaves much garbage behind. */
export type Collector = (opts?: { release?: boolean }) => void;

let collector: Collector | undefined;

/**
 * Installs the collector a run uses: the CLI's runtime tuning installs one that forces V8's collection
 * (src/cli/runtime-tuning.ts); a library host has none unless it installs one, so a run in its process never
 * forces a collection or touches V8's flags.
 */
export function setGarbageCollector(c: Collector | undefined): void {
  collector = c;
}

/** A full collection now, if a collector is installed (see setGarbageCollector); otherwise nothing. */
export function collectGarbage(opts: { release?: boolean } = {}): void {
  collector?.(opts);
}

/**
 * A full collection after every `everyBytes` the caller counts (the query command's written results: see
 * src/cli/commands/query.ts), for output that V8 would otherwise let pile up beside the heap.
 */
export class GarbagePacer {
  private since = 0;

  constructor(
    private readonly everyBytes: number,
    private readonly collect: () => void = () => collectGarbage(),
  ) {}

  add(bytes: number): void {
    this.since += bytes;
    if (this.since < this.everyBytes) return;
    this.since = 0;
    this.collect();
  }
}

/** Told when the process starts receiving response bodies for a run, and when the last run stops (see receivingBodies). */
export type ReceivingHook = (receiving: boolean) => void;

let receivingHook: ReceivingHook | undefined;
let receivers = 0;

/** Installs the hook (the CLI's runtime tuning does); a library host has none unless it installs one. */
export function setReceivingHook(hook: ReceivingHook | undefined): void {
  receivingHook = hook;
}

/**
 * Runs `fetch` as a phase in which response bodies come in, in buffers the body pool lends and takes back
 * (src/extract/body-pool.ts). The CLI's runtime tuning lets V8's old generation grow further during it, since
 * the bodies leave no garbage to bound, and gives V8 back its own growth when the last such phase in the process
 * ends: afterwards the commits' statement results are what V8's own collections free, and they hold DuckDB
 * memory. Then the pool's spare buffers are dropped too.
 */
export async function receivingBodies<T>(fetch: () => Promise<T>): Promise<T> {
  if (receivers++ === 0) receivingHook?.(true);
  try {
    return await fetch();
  } finally {
    if (--receivers === 0) {
      drainBodyPool();
      receivingHook?.(false);
    }
  }
}
