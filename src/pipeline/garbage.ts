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
 * Response bodies handled between two full collections while a run fetches (see GarbagePacer): the largest
 * interval that kept the memory bench's peak down at no cost in speed (docs/performance.md, "Runtime tuning").
 */
export const GARBAGE_EVERY_BYTES = 24 * 1024 * 1024;

/**
 * A full collection after every `everyBytes` of response bodies the run has handled. Pages arrive faster than V8
 * collects their buffers: it starts marking once external memory has grown well past the last collection and
 * keeps allocating meanwhile, so dead page buffers piled up beside the heap while fetching.
 */
export class GarbagePacer {
  private since = 0;

  constructor(
    private readonly everyBytes: number = GARBAGE_EVERY_BYTES,
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
 * Runs `fetch` as a phase in which response bodies come in and are paced by a GarbagePacer. The CLI's runtime
 * tuning lets V8's old generation grow further during it, since the paced collections bound what dead bodies
 * hold, and gives V8 back its own growth when the last such phase in the process ends: afterwards the commits'
 * statement results are what V8's own collections free, and they hold DuckDB memory.
 */
export async function receivingBodies<T>(fetch: () => Promise<T>): Promise<T> {
  if (receivers++ === 0) receivingHook?.(true);
  try {
    return await fetch();
  } finally {
    if (--receivers === 0) receivingHook?.(false);
  }
}
