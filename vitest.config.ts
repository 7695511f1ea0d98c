import { defineConfig } from 'vitest/config';
import { fastTestFiles } from './test/tiers.js';

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

export default defineConfig({
  test: {
    globalSetup: ['test/global-setup.ts'],
    // DuckDB and the simulator are real: two cores, so keep parallelism modest.
    maxWorkers: 2,
    projects: [
      // The inner loop's tier (npm run test:fast): no child process, PostgreSQL, kill or soak (test/tiers.ts).
      // Its files change no process-wide state, so a fork runs one file after another without a fresh start:
      // the modules (DuckDB's binding, the simulator's generated chains) load once per fork, not once per file.
      { test: { ...shared, name: 'fast', include: fast, isolate: false } },
      // Files that start processes, PostgreSQL or soaks, or set the process's environment: a fresh fork each. Their
      // PostgreSQL is one server for the run (test/postgres-setup.ts) and `dist/` is built for their CLI children
      // (test/build-setup.ts), both only when files of this tier run.
      {
        test: { ...shared, name: 'process', include: ['test/**/*.test.ts'], exclude: fast, globalSetup: ['test/build-setup.ts', 'test/postgres-setup.ts'] },
      },
    ],
  },
});
