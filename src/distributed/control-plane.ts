/**
 * The distributed mode's one control plane, PostgreSQL: the DuckLake catalog (schema `ducklake`), chainlake's own
 * tables (schema `chainlake`: runs, windows, watermarks, the committer lease) and the work queue (pg-boss, schema
 * `chainlake_queue`). Every decision that must hold across machines is taken here, never on the object store.
 */
import { requestsLedgerDdl } from '../load/ledger/requests.js';
import { blockTimesLedgerDdl } from '../load/ledger/block-times.js';
import pg from 'pg';
import { PostgresCatalog } from '../ducklake/postgres-catalog.js';
import { initialiseCatalog } from '../ducklake/ddl.js';
import { ControlPlaneError } from './errors.js';
import { migrateLedger } from '../load/ledger/schema.js';
import type { Ledger } from '../load/ledger/windows.js';
import type { PgClientLike } from '../ducklake/postgres-catalog.js';
import { redactUrl } from './url.js';
import { ensureVerificationsTable } from '../load/ledger/verifications.js';

export const CATALOG_SCHEMA = 'ducklake';
export const CONTROL_SCHEMA = 'chainlake';
export const QUEUE_SCHEMA = 'chainlake_queue';
/** The pg-boss queue of windows to fetch. */
export const WINDOW_QUEUE = 'chainlake-windows';

export { ControlPlaneError };

export { redactUrl } from './url.js';

/** Checks `--catalog`: a postgres:// or postgresql:// URL (the password may come from PGPASSWORD instead). */
export function checkCatalogUrl(url: string | undefined, flag = '--catalog'): string {
  if (!url) throw new ControlPlaneError(`${flag} is required`, `give ${flag} postgres://user@host:5432/database (the password from PGPASSWORD or ~/.pgpass)`);
  if (!/^postgres(ql)?:\/\//i.test(url)) {
    throw new ControlPlaneError(
      `${flag} ${redactUrl(url)} is not a PostgreSQL URL`,
      `the distributed mode's catalog is PostgreSQL: ${flag} postgres://user@host:5432/database`,
    );
  }
  return url;
}

/**
 * The control plane's lineage and coordination tables, beside the run ledger (runs, windows, watermarks, commits, request_usage:
 * declared once for both modes in load/ledger/schema.ts and created or migrated by migrateLedger).
 */
const CONTROL_DDL = [
  // Lineage: each window's calls, recorded by the commit that commits the window (load/ledger/requests.ts).
  ...requestsLedgerDdl(CONTROL_SCHEMA),
  // The block times each run asked, shared by its workers (load/ledger/block-times.ts).
  ...blockTimesLedgerDdl(CONTROL_SCHEMA),
  `CREATE TABLE IF NOT EXISTS ${CONTROL_SCHEMA}.leases (
     name TEXT PRIMARY KEY,
     holder TEXT NOT NULL,
     expires_at TIMESTAMPTZ NOT NULL
   )`,
  // Each worker's last sign of life, and which worker holds which queue job: a window whose worker stopped
  // answering is offered again long before its --window-timeout (src/distributed/liveness.ts).
  `CREATE TABLE IF NOT EXISTS ${CONTROL_SCHEMA}.workers (
     worker TEXT PRIMARY KEY,
     seen_at TIMESTAMPTZ NOT NULL
   )`,
  `CREATE TABLE IF NOT EXISTS ${CONTROL_SCHEMA}.holds (
     job_id UUID PRIMARY KEY,
     worker TEXT NOT NULL,
     taken_at TIMESTAMPTZ NOT NULL DEFAULT NOW()
   )`,
  // Control planes written before runs took the single machine's status words (src/distributed/runs.ts).
  `UPDATE ${CONTROL_SCHEMA}.runs SET status = 'complete' WHERE status = 'completed'`,
];

/** The run ledger in the control plane, on `client` (its window transitions: load/ledger/windows.ts). */
export function controlLedger(client: PgClientLike): Ledger {
  return { db: new PostgresCatalog(client), schema: CONTROL_SCHEMA };
}

/** Any key for the advisory lock that serialises setting up the control plane (several workers start at once). */
const SETUP_LOCK = 7_214_002_201;

/**
 * Runs `work` while `client`'s session holds the setup lock: what several machines starting at once must not
 * do side by side (pg-boss creating its schema on a new database: two workers doing so at once were seen to
 * leave one of them waiting forever).
 */
export async function underSetupLock<T>(client: pg.Client, work: () => Promise<T>): Promise<T> {
  await client.query('SELECT pg_advisory_lock($1)', [SETUP_LOCK]);
  try {
    return await work();
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [SETUP_LOCK]).catch(() => undefined);
  }
}

/** A client from the pool, or a connection problem named with the (redacted) URL and what to check. */
export async function connect(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url, application_name: 'chainlake' });
  // A server that goes away mid-run emits 'error' on the client: reported through the next query instead of
  // ending the process.
  client.on('error', () => undefined);
  try {
    await client.connect();
  } catch (error) {
    await client.end().catch(() => undefined);
    throw new ControlPlaneError(
      `cannot connect to the catalog ${redactUrl(url)}: ${(error as Error).message}`,
      'check --catalog (host, port, database, user) and the password in PGPASSWORD or ~/.pgpass',
      error,
    );
  }
  return client;
}

/**
 * Creates what is missing: chainlake's tables and an empty DuckLake catalog whose data path is `dataPath`, and
 * migrates an older control plane's ledger. Idempotent, and safe when several machines start at once (one advisory lock).
 * `dataPath` undefined: chainlake's tables only, never a new DuckLake catalog (`catalog rebuild --catalog`: an empty
 * catalog in place of a lost one would make every file of the store look like an orphan to `maintain --catalog`).
 */
export async function setupControlPlane(client: pg.Client, dataPath: string | undefined): Promise<void> {
  await client.query('BEGIN');
  try {
    await client.query('SELECT pg_advisory_xact_lock($1)', [SETUP_LOCK]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${CONTROL_SCHEMA}`);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${CATALOG_SCHEMA}`);
    // The run ledger, created or (a control plane of an earlier chainlake) migrated to the one both modes share.
    await migrateLedger(nestedCatalog(client), CONTROL_SCHEMA);
    for (const statement of CONTROL_DDL) await client.query(statement);
    await ensureVerificationsTable(nestedCatalog(client), CONTROL_SCHEMA);
    const exists = await client.query(`SELECT 1 FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'ducklake_metadata'`, [CATALOG_SCHEMA]);
    if (exists.rowCount === 0 && dataPath !== undefined) {
      // A ledger that committed windows had a catalog: it was lost, and an empty one in its place would make every
      // file of the store an orphan that `maintain --catalog` deletes.
      const committed = await client.query(`SELECT 1 FROM ${CONTROL_SCHEMA}.windows WHERE status IN ('committed', 'provisional') LIMIT 1`);
      if ((committed.rowCount ?? 0) > 0) {
        throw new ControlPlaneError(
          `the control plane records committed windows but its DuckLake catalog (schema ${CATALOG_SCHEMA}) is gone: no new catalog was created in its place`,
          'restore the database from its backup; chainlake catalog rebuild --catalog … --store … says what the store holds (run no maintain --catalog before: it would delete those files)',
        );
      }
      await client.query(`SET LOCAL search_path TO ${CATALOG_SCHEMA}`);
      // initialiseCatalog runs its own BEGIN/COMMIT; inside ours PostgreSQL only warns and carries on in this one.
      await initialiseCatalog(nestedCatalog(client), { dataPath });
    }
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}

/** A catalog on a client that is already in a transaction: BEGIN/COMMIT/ROLLBACK of the catalog are left out. */
function nestedCatalog(client: pg.Client): PostgresCatalog {
  const inner = new PostgresCatalog({
    query: (text: string, values?: unknown[]) =>
      /^(BEGIN|COMMIT|ROLLBACK)/i.test(text) ? Promise.resolve({ rows: [], fields: [] }) : client.query(text, values),
  });
  return inner;
}

/**
 * A connection whose single statements are sent one after another: several tasks of a worker (its window slots,
 * a renewal timer) share it, and `pg` wants one query at a time per connection. Not for transactions.
 */
export function oneAtATime(client: pg.Client): Pick<pg.Client, 'query'> & { end(): Promise<void> } {
  let queue: Promise<unknown> = Promise.resolve();
  const query = (text: string, values?: unknown[]) => {
    const next = queue.then(() => client.query(text, values));
    queue = next.catch(() => undefined);
    return next;
  };
  return { query: query as unknown as pg.Client['query'], end: () => client.end() };
}

/** The DuckLake catalog on its own connection, its statements resolved in the `ducklake` schema. */
export async function openCatalog(url: string): Promise<{ client: pg.Client; catalog: PostgresCatalog }> {
  const client = await connect(url);
  await client.query(`SET search_path TO ${CATALOG_SCHEMA}`);
  return { client, catalog: new PostgresCatalog(client) };
}
