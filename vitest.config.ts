import { defineConfig } from 'vitest/config';
import { TEST_PG_PASSWORD } from './test/ducklake/test-password.js';
import { fastTestFiles, sharedProcessTestFiles } from './test/tiers.js';

// Each project runs with these; the fork watch once for the run, at the root (test/global-setup.ts).
const shared = {
  setupFiles: ['test/fork-note.ts'],
  // A timeout only bounds a hang (every child process also has a hard kill of its own). The heavy tests run real
  // CLI, worker and PostgreSQL processes whose time follows the machine's speed and load: with one of this
  // machine's two cores kept busy they took 2.5 times as long, and a 60 s bound failed tests that were not hung.
  testTimeout: 180_000,
  hookTimeout: 180_000,
  pool: 'forks' as const,
};

const fast = fastTestFiles();
const sharedProcess = sharedProcessTestFiles();
const processSetup = ['test/build-setup.ts', 'test/postgres-setup.ts'];
// The test PostgreSQL's password, for every file of the process tier and the processes they start.
const processEnv = { PGPASSWORD: TEST_PG_PASSWORD };

export default defineConfig({
  test: {
    globalSetup: ['test/global-setup.ts'],
    // DuckDB and the simulator are real: two cores, so keep parallelism modest.
    maxWorkers: 2,
    // Transformed sources kept on disk between runs (keyed by each file's content, its id and the configuration,
    // dropped when the lockfile changes): a run no longer transforms and serves every module afresh
    // (docs/performance.md, "The test suite"). Vitest 5's default; experimental in 4.
    experimental: { fsModuleCache: true, fsModuleCachePath: 'node_modules/.vitest-cache' },
    projects: [
      // The inner loop's tier (npm run test:fast): no child process, PostgreSQL, kill or soak (test/tiers.ts).
      // Its files change no process-wide state, so a fork runs one file after another without a fresh start:
      // the modules (DuckDB's binding, the simulator's generated chains) load once per fork, not once per file.
      { test: { ...shared, name: 'fast', include: fast, isolate: false } },
      // Files that start processes or PostgreSQL: `dist/` is built for their CLI children (test/build-setup.ts, once:
      // the second project finds it built) and one PostgreSQL server serves each project (test/postgres-setup.ts),
      // both only when files of the project run. Those that leave the process as they found it share forks, as the
      // fast tier's do; those that change it (its environment, signal handlers, the CLI's runtime tuning:
      // test/tiers.ts) get a fresh fork each.
      { test: { ...shared, name: 'process', include: sharedProcess, isolate: false, globalSetup: processSetup, env: processEnv } },
      {
        test: {
          ...shared,
          name: 'process-own-fork',
          include: ['test/**/*.test.ts'],
          exclude: [...fast, ...sharedProcess],
          globalSetup: processSetup,
          env: processEnv,
        },
      },
    ],
  },
});
