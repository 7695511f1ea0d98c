import v8 from 'node:v8';
import vm from 'node:vm';

type Collect = (options?: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

let collect: Collect | null | undefined;

/**
 * One full garbage collection, now. When a run stops fetching, its JavaScript goes quiet while DuckDB merges
 * the last batches, so V8 collects nothing more: page buffers and parsed envelopes fetched last stayed resident
 * through every remaining commit (in the 5M-row memory bench a heap of ~80 MB and ~30 MB of buffers, mostly
 * dead, beside those commits). V8 exposes no collection to a program started without `--expose-gc`; the flag
 * may be turned on for a fresh context, which then has `gc` (as jest's leak detector does), and off again.
 * Where that is not possible this does nothing: it frees memory sooner, it is never needed for correctness.
 *
 * `release` also gives the freed heap pages back to the system, for a program that will allocate little
 * after it. Node 22 and 24 keep them otherwise: after a plain collection the 5M-row export kept a heap of 40 MB
 * with 22 used through its last commits on Node 24. V8 12 and later do that in their last-resort collection
 * (`flavor`); V8 11 (Node 20) collects nothing when `gc` is given options, so the plain collection comes first.
 */
export function collectGarbage(opts: { release?: boolean } = {}): void {
  if (collect === undefined) {
    collect = null;
    const exposed = (globalThis as { gc?: Collect }).gc;
    if (typeof exposed === 'function') collect = exposed;
    else {
      try {
        v8.setFlagsFromString('--expose-gc');
        const gc = vm.runInNewContext('gc') as unknown;
        if (typeof gc === 'function') collect = gc as Collect;
      } catch {
        // Not available on this runtime: leave collection to V8.
      } finally {
        v8.setFlagsFromString('--no-expose-gc');
      }
    }
  }
  collect?.();
  if (opts.release) collect?.({ type: 'major', execution: 'sync', flavor: 'last-resort' });
}

/**
 * Response bodies handled between two full collections while a run fetches (see GarbagePacer). With V8's young
 * generation kept small the 5M-row export peaks while it fetches, where a background commit meets the garbage
 * of the pages fetched meanwhile: `npm run bench -- memory` gave 378-382 MB at 32 MB, 367-371 at 24 and 364-369
 * at 16, where 16 cost some 7 % of the end-to-end speed (79,800 against 85,900 rows per CPU-second, means of
 * three interleaved `npm run bench -- e2e` runs each) and 24 nothing beyond the bench's spread.
 */
export const GARBAGE_EVERY_BYTES = 24 * 1024 * 1024;

/**
 * A full collection after every `everyBytes` of response bodies the run has handled. Pages arrive faster than V8
 * collects their buffers: it starts marking once external memory has grown 64 MB past the last collection and
 * keeps allocating meanwhile, so dead page buffers reached 80-90 MB beside a heap of ~80 MB while fetching.
 */
export class GarbagePacer {
  private since = 0;

  constructor(
    private readonly everyBytes: number = GARBAGE_EVERY_BYTES,
    private readonly collect: () => void = collectGarbage,
  ) {}

  add(bytes: number): void {
    this.since += bytes;
    if (this.since < this.everyBytes) return;
    this.since = 0;
    this.collect();
  }
}
