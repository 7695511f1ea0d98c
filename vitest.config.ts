import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    setupFiles: ['test/fork-note.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // DuckDB and the simulator are real: two cores, so keep parallelism modest.
    pool: 'forks',
    maxWorkers: 2,
  },
});
