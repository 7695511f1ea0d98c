// Imported for its side effects, first thing in the CLI (src/cli/main.ts), never by the library (src/index.ts):
// the process is the CLI's own, so it may tune V8 and DuckDB's allocator for a run's workload. A library host
// keeps its process as it configured it. `CHAINLAKE_RUNTIME_TUNING=off` turns all of it off. The figures that
// justify each setting are in docs/performance.md ("Runtime tuning").
import v8 from 'node:v8';
import vm from 'node:vm';
import { setGarbageCollector, setReceivingHook, type Collector } from '../pipeline/garbage.js';

/** The switch: `off` (or `0`, `false`, `no`) leaves V8, garbage collection and DuckDB's allocator at their defaults. */
export const TUNING_ENV = 'CHAINLAKE_RUNTIME_TUNING';

export function tuningEnabled(env: NodeJS.ProcessEnv = process.env): boolean {
  return !/^(off|0|false|no)$/i.test(env[TUNING_ENV] ?? '');
}

// --- DuckDB's allocator -------------------------------------------------------------------------------------

/**
 * Options for DuckDB's own allocator (a jemalloc linked into the library), which reads them once, when the
 * library loads, from `DUCKDB_JE_MALLOC_CONF`; a value the user set is left as it is. Hence this module comes
 * before any import that loads DuckDB.
 *
 * Why: a run pushes all its data through DuckDB (typing, sorting, Parquet writing), and jemalloc keeps what
 * DuckDB frees for reuse. With DuckDB's own options (an arena per two cores, per-thread caches, freed pages
 * returned after a second or more, lazily) most of a run's peak above DuckDB's memory limit was memory freed
 * but still resident. Nothing returns it sooner: DuckDB purges on its worker threads' idle time, and a run
 * keeps DuckDB on one thread while it fetches, so there are none.
 * - `narenas:1`: one arena, so memory freed on one thread serves the next allocation on any other (the Node
 *   binding runs queries on libuv's threads, DuckDB on its own);
 * - `tcache:false`: no per-thread caches of freed blocks beside it;
 * - `oversize_threshold`: large allocations (JSON read buffers, a row group's Parquet pages) come from
 *   jemalloc's dedicated arena, which returns them to the system as they are freed (the threshold and what it
 *   measured: docs/performance.md, Runtime tuning);
 * - `muzzy_decay_ms:0`: pages past their decay go back to the system (MADV_DONTNEED) instead of being marked
 *   lazily free first, which leaves them counted in the process's resident memory until the kernel wants them.
 * Returning every page at once (`dirty_decay_ms:0`) cut the peak further but cost much of the run's speed in
 * page faults and TLB shootdowns.
 */
export const DUCKDB_ALLOCATOR_CONF = 'narenas:1,tcache:false,oversize_threshold:8388608,muzzy_decay_ms:0';

export const ALLOCATOR_ENV = 'DUCKDB_JE_MALLOC_CONF';

export function configureDuckDBAllocator(env: NodeJS.ProcessEnv): void {
  if (env[ALLOCATOR_ENV] === undefined) env[ALLOCATOR_ENV] = DUCKDB_ALLOCATOR_CONF;
}

/** Whether the user gave a V8 option matching `option`, on the command line or in NODE_OPTIONS: theirs is kept. */
function userSet(option: RegExp, execArgv: readonly string[], nodeOptions: string | undefined): boolean {
  return execArgv.some((a) => option.test(a)) || option.test(nodeOptions ?? '');
}

// --- V8's young generation ----------------------------------------------------------------------------------

/** V8 options that size the young generation; a user who set one of them keeps V8 as they configured it. */
const USER_SIZING = /--(?:max|min)[-_]semi[-_]space[-_]size|--semi[-_]space[-_]growth[-_]factor/;

/**
 * Keeps V8's young generation at its initial size, by setting the factor it grows
 * by to 1. V8 grows it while many objects survive a scavenge, as a page's parsed rows do while they are typed,
 * and gives it back only when its memory reducer finds the program idle, which a run never is until it ends:
 * the grown semi-spaces stayed resident through the last commits, where a run peaks. A process's semi-space
 * size is fixed when V8 starts, before any of our code, but the growth factor is read whenever the space would
 * grow.
 */
export function keepYoungGenerationSmall(execArgv: readonly string[], nodeOptions: string | undefined): void {
  if (userSet(USER_SIZING, execArgv, nodeOptions)) return;
  v8.setFlagsFromString('--semi-space-growth-factor=1');
}

// --- V8's old generation ------------------------------------------------------------------------------------

/** The V8 option that sets how far the old generation grows between full collections; a user's value is kept. */
const USER_GROWING = /--heap[-_]growing[-_]percent/;

/** How far the old generation may grow past what survived the last full collection, in percent of it. */
export const HEAP_GROWING_PERCENT = 200;

/**
 * While a run receives response bodies, lets V8's old generation grow to three times what survived the last full
 * collection before V8 starts the next one. V8 counts the memory of buffers that outlived a young-generation
 * collection (bodies in flight, pages being staged) against the old generation's limit, which it sets little
 * above the live heap: while pages came in it marked the whole heap again after every few megabytes of bodies,
 * and that marking was a large share of a run's CPU. Bodies themselves leave nothing dead behind: their buffers
 * are used again (src/extract/body-pool.ts). When the run stops fetching V8 gets its own growth back (0: V8 computes it), so that
 * its collections go on freeing the commits' statement results, which hold DuckDB memory. V8 reads the value
 * whenever it sets a new limit, after each full collection.
 */
export function growOldGenerationWhileReceiving(execArgv: readonly string[], nodeOptions: string | undefined): void {
  if (userSet(USER_GROWING, execArgv, nodeOptions)) return;
  setReceivingHook((receiving) => v8.setFlagsFromString(`--heap-growing-percent=${receiving ? HEAP_GROWING_PERCENT : 0}`));
}

// --- Forced collections -------------------------------------------------------------------------------------

type V8Collect = (options?: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

let v8Collect: V8Collect | null | undefined;

/**
 * One full garbage collection, now. When a run stops fetching, its JavaScript goes quiet while DuckDB merges
 * the last batches, so V8 collects nothing more: page buffers and parsed envelopes fetched last stayed resident
 * through every remaining commit. V8 exposes no collection to a program started without `--expose-gc`; the
 * flag may be turned on for a fresh context, which then has `gc` (as jest's leak detector does), and off
 * again. Where that is not possible this does nothing: it frees memory sooner, it is never needed for
 * correctness.
 *
 * `release` also gives the freed heap pages back to the system, for a program that will allocate little after
 * it (Node 22 and 24 keep them otherwise). V8 12 and later do that in their last-resort collection (`flavor`);
 * V8 11 (Node 20) collects nothing when `gc` is given options, so the plain collection comes first.
 */
export const forceCollection: Collector = (opts = {}) => {
  if (v8Collect === undefined) {
    v8Collect = null;
    const exposed = (globalThis as { gc?: V8Collect }).gc;
    if (typeof exposed === 'function') v8Collect = exposed;
    else {
      try {
        v8.setFlagsFromString('--expose-gc');
        const gc = vm.runInNewContext('gc') as unknown;
        if (typeof gc === 'function') v8Collect = gc as V8Collect;
      } catch {
        // Not available on this runtime: leave collection to V8.
      } finally {
        v8.setFlagsFromString('--no-expose-gc');
      }
    }
  }
  v8Collect?.();
  if (opts.release) v8Collect?.({ type: 'major', execution: 'sync', flavor: 'last-resort' });
};

/** Everything above, unless the switch is off. */
export function applyRuntimeTuning(env: NodeJS.ProcessEnv = process.env, execArgv: readonly string[] = process.execArgv): boolean {
  if (!tuningEnabled(env)) return false;
  configureDuckDBAllocator(env);
  keepYoungGenerationSmall(execArgv, env.NODE_OPTIONS);
  growOldGenerationWhileReceiving(execArgv, env.NODE_OPTIONS);
  setGarbageCollector(forceCollection);
  return true;
}

applyRuntimeTuning();
