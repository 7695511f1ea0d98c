import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    setupFiles: ['test/fork-note.ts'],
    // A timeout only bounds a hang (every child process also has a hard kill of its own). The heavy tests run real
    // CLI, worker and PostgreSQL processes whose time follows the machine's speed and load: with one of this
    // machine's two cores kept busy they took 2.5 times as long, and a 60 s bound failed tests that were not hung.
    testTimeout: 180_000,
    hookTimeout: 180_000,
    // DuckDB and the simulator are real: two cores, so keep parallelism modest.
    pool: 'forks',
    maxWorkers: 2,
  },
});
