// Imported for its side effect, first thing in the CLI: see keepYoungGenerationSmall.
import v8 from 'node:v8';

/** V8 options that size the young generation; a user who set one of them keeps V8 as they configured it. */
const USER_SIZING = /--(?:max|min)[-_]semi[-_]space[-_]size|--semi[-_]space[-_]growth[-_]factor/;

/**
 * Keeps V8's young generation at its initial size (1 MB semi-spaces on 64-bit), by setting the factor it grows
 * by to 1. V8 grows it while many objects survive a scavenge, as a page's parsed rows do while they are typed
 * (here to 2 × 16 MB on Node 20 and 22, to 2 × 64 MB on Node 24), and gives it back only when its memory
 * reducer finds the program idle, which a run never is until it ends. In the 5M-row memory bench on Node 20
 * those 32 MB were resident through the last commits, where the run peaked with DuckDB's merges beside them:
 * single exports of that workload peaked at 406.5 and 409.4 MB with the default and at 369.6 MB with 1 MB
 * semi-spaces (`--max-semi-space-size=1`), at the same end-to-end speed (six interleaved
 * `npm run bench -- e2e` runs, 118,926-134,494 rows/s either way). A process's semi-space size is fixed when
 * V8 starts, before any of our code, but the growth factor is read whenever the space would grow.
 */
export function keepYoungGenerationSmall(execArgv: readonly string[], nodeOptions: string | undefined): void {
  if (execArgv.some((a) => USER_SIZING.test(a)) || USER_SIZING.test(nodeOptions ?? '')) return;
  v8.setFlagsFromString('--semi-space-growth-factor=1');
}

keepYoungGenerationSmall(process.execArgv, process.env.NODE_OPTIONS);
