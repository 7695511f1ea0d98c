import { createInterface } from 'node:readline';

/**
 * TEST-ONLY fault injection for the crash-safety suite (test/load). Production never sets these variables;
 * unset, every hook is a no-op.
 *
 * - `CHAINLAKE_TEST_CRASH_AT=<step>[,<step>…]`: the process SIGKILLs itself the first time it reaches a step.
 * - `CHAINLAKE_TEST_HOLD_AT=<step>`: at that step the process prints `chainlake-test-hold <step>` on stderr
 *   and waits for one line on stdin, so a test can look at the lake mid-commit (or SIGKILL it there).
 *
 * Steps, in the order a run reaches them: `stage-write` (a window's rows half staged), `typed` (a dataset's
 * staged rows typed to Parquet), `final` (a merged partition file written), `journal` (commit decided,
 * nothing renamed), `rename` (after the first rename into the lake), `catalog` (every file in place, catalog
 * not yet updated), `committed` (catalog committed, journal not yet removed).
 *
 * Distributed mode (src/distributed): `fragment` (a window's fragment written to the store, not yet recorded),
 * `lake-files` (a commit's new partition files written, catalog untouched), `lake-commit` (inside the commit's
 * PostgreSQL transaction, just before COMMIT), `lake-committed` (committed, fragments not yet removed).
 */
export const COMMIT_STEPS = ['stage-write', 'typed', 'final', 'journal', 'rename', 'catalog', 'committed'] as const;
export const DISTRIBUTED_STEPS = ['fragment', 'lake-files', 'lake-commit', 'lake-committed'] as const;
export type CommitStep = (typeof COMMIT_STEPS)[number] | (typeof DISTRIBUTED_STEPS)[number];

const crashAt = new Set((process.env.CHAINLAKE_TEST_CRASH_AT ?? '').split(',').filter(Boolean));
const holdAt = process.env.CHAINLAKE_TEST_HOLD_AT ?? '';
const held = new Set<string>();

export async function testHook(step: CommitStep): Promise<void> {
  if (crashAt.has(step)) process.kill(process.pid, 'SIGKILL');
  if (holdAt === step && !held.has(step)) {
    held.add(step);
    process.stderr.write(`chainlake-test-hold ${step}\n`);
    const rl = createInterface({ input: process.stdin });
    await new Promise<void>((resolve) => rl.once('line', () => resolve()));
    rl.close();
  }
}
