import type { TestProject } from 'vitest/node';
import { startServer } from './ducklake/postgres.js';

/**
 * One PostgreSQL server for the process tier's run (vitest.config.ts): each file's startPostgres() takes databases
 * of its own on it instead of an initdb and a server per file. vitest runs a project's global setup only when it runs
 * files of that project, so the fast tier never starts it. Two files run at once, each with worker processes and
 * their pools, hence more connections than the default.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const server = await startServer({ maxConnections: 400 });
  project.provide('chainlakePostgres', { port: server.port, password: server.password });
  return () => server.stop();
}
