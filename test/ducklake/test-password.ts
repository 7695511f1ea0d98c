/**
 * The test PostgreSQL's superuser password (test/ducklake/postgres.ts). The process tier's projects set it as
 * PGPASSWORD for their files and every process they start (vitest.config.ts), as a deployment sets it for its
 * workers, so a file need not change its process's environment to reach the server and can share a fork.
 */
export const TEST_PG_PASSWORD = 'chainlake-test';
