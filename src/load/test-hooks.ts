import { createInterface } from 'node:readline';

/**
 * TEST-ONLY fault injection for the crash-safety suite (test/load), armed by the CLI's bin from these variables
 * (armTestHooks). Production never sets them; unset, every hook is a no-op.
 *
 * - `CHAINLAKE_TEST_CRASH_AT=<step>[,<step>…]`: the process SIGKILLs itself the first time it reaches a step.
 * - `CHAINLAKE_TEST_HOLD_AT=<step>[,<step>…]`: the first time it reaches each of these steps the process prints
 *   `chainlake-test-hold <step>` on stderr and waits for one line on stdin, so a test can look at the lake
 *   mid-commit (or SIGKILL it there); several steps hold one run at each in turn.
 *
 * Steps, in the order a run reaches them: `stage-write` (a window's rows half staged), `typed` (a dataset's
 * staged rows typed to Parquet), `final` (a merged partition file written), `prepared` (every file of a commit
 * written, nothing decided: another DuckLake writer may commit meanwhile), `journal` (commit decided,
 * nothing renamed), `rename` (after the first rename into the lake), `catalog` (every file in place, catalog
 * not yet updated), `committed` (catalog committed, journal not yet removed); and, after a commit that could not
 * happen, `kept` (the run's fetched windows moved to `_kept/` and listed there, not yet recorded: pipeline/kept.ts).
 *
 * Distributed mode (src/distributed): `fragment` (a window's fragment written to the store, not yet recorded),
 * `lake-files` (a commit's new partition files written, catalog untouched), `lake-commit` (inside the commit's
 * PostgreSQL transaction, just before COMMIT), `lake-committed` (committed, fragments not yet removed),
 * `rebuild-read` (`catalog rebuild --catalog` has read the catalog's files, not yet listed the store's).
 */
export const COMMIT_STEPS = ['stage-write', 'typed', 'final', 'prepared', 'journal', 'rename', 'catalog', 'committed', 'kept'] as const;
export const DISTRIBUTED_STEPS = ['fragment', 'lake-files', 'lake-commit', 'lake-committed', 'rebuild-read'] as const;
export type CommitStep = (typeof COMMIT_STEPS)[number] | (typeof DISTRIBUTED_STEPS)[number];

let crashAt = new Set<string>();
let listener: ((step: CommitStep) => Promise<void>) | undefined;
let holdAt = new Set<string>();
const held = new Set<string>();

/**
 * Arms the hooks: the CLI's bin does, from the two variables above (src/cli/main.ts); unarmed, each is a no-op.
 * `holdAt` is one step or several, comma-separated.
 */
export function armTestHooks(opts: { crashAt: readonly string[]; holdAt: string }): void {
  crashAt = new Set(opts.crashAt);
  holdAt = new Set(opts.holdAt.split(',').filter(Boolean));
}

/**
 * In-process tests: `fn` runs at every step reached, until cleared (no argument), where a child process would hold
 * (e.g. another DuckLake writer commits at `prepared`).
 */
export function onTestHook(fn?: (step: CommitStep) => Promise<void>): void {
  listener = fn;
}

export async function testHook(step: CommitStep): Promise<void> {
  if (listener) await listener(step);
  if (crashAt.has(step)) process.kill(process.pid, 'SIGKILL');
  if (holdAt.has(step) && !held.has(step)) {
    held.add(step);
    process.stderr.write(`chainlake-test-hold ${step}\n`);
    const rl = createInterface({ input: process.stdin });
    await new Promise<void>((resolve) => rl.once('line', () => resolve()));
    rl.close();
  }
}
