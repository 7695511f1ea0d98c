/**
 * The committer lease: exactly one committer writes the distributed lake at a time (a worker's commit, a
 * compaction, a decoding, a repair), the holder of a lease row in the control plane, taken when it is free or
 * expired, renewed while its work runs, checked again inside the commit's catalog transaction, released after.
 */
import type pg from 'pg';
import type { CatalogDb } from '../ducklake/catalog-db.js';
import { ChainlakeError } from '../errors.js';
import { CONTROL_SCHEMA } from './control-plane.js';
import { LeaseLostError } from './errors.js';

export const COMMITTER_LEASE = 'committer';

export { LeaseLostError };

/** Who holds the lease, and for how long each taking or renewal holds it. */
export interface LeaseHolder {
  holder: string;
  leaseSeconds: number;
}

/**
 * Extends the lease while this holder still has it; false when it went to another (or was released). It never takes
 * a lease back: a holder whose row is still its own was never followed by another committer (taking the lease
 * rewrites the holder, releasing deletes the row), so what it read of the lake is still the lake's.
 */
export async function renewLease(client: Pick<pg.Client, 'query'>, holder: string, seconds: number, name = COMMITTER_LEASE): Promise<boolean> {
  const r = await client.query(
    `UPDATE ${CONTROL_SCHEMA}.leases SET expires_at = NOW() + make_interval(secs => $3) WHERE name = $1 AND holder = $2 RETURNING holder`,
    [name, holder, seconds],
  );
  return r.rowCount === 1;
}

/** Renews the lease every third of it (renewLease: never taken back) until the returned function is called. */
export function keepRenewed(client: Pick<pg.Client, 'query'>, holder: string, seconds: number): () => void {
  // A renewal that finds the lease gone changes nothing: the commit's own check (confirmLease) then refuses.
  const timer = setInterval(() => void renewLease(client, holder, seconds).catch(() => undefined), (seconds * 1000) / 3);
  return () => clearInterval(timer);
}

/**
 * Inside a commit's catalog transaction: the committer lease is still this holder's and unexpired, extended and its
 * row locked until the transaction ends (another worker's take waits for the commit, and then finds it held).
 */
export async function confirmLease(tx: CatalogDb, deps: LeaseHolder): Promise<void> {
  const lease = await tx.query(
    `UPDATE ${CONTROL_SCHEMA}.leases SET expires_at = NOW() + make_interval(secs => $3) WHERE name = $1 AND holder = $2 AND expires_at > NOW() RETURNING holder`,
    [COMMITTER_LEASE, deps.holder, deps.leaseSeconds],
  );
  if (lease.length === 0) throw new LeaseLostError(deps.holder);
}

/** Takes or renews the lease when it is free, expired or ours; true when this holder has it afterwards. */
export async function takeLease(client: Pick<pg.Client, 'query'>, holder: string, seconds: number, name = COMMITTER_LEASE): Promise<boolean> {
  const r = await client.query(
    `INSERT INTO ${CONTROL_SCHEMA}.leases (name, holder, expires_at) VALUES ($1, $2, NOW() + make_interval(secs => $3))
     ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
       WHERE ${CONTROL_SCHEMA}.leases.holder = EXCLUDED.holder OR ${CONTROL_SCHEMA}.leases.expires_at < NOW()
     RETURNING holder`,
    [name, holder, seconds],
  );
  return r.rowCount === 1;
}

export async function releaseLease(client: Pick<pg.Client, 'query'>, holder: string, name = COMMITTER_LEASE): Promise<void> {
  await client.query(`DELETE FROM ${CONTROL_SCHEMA}.leases WHERE name = $1 AND holder = $2`, [name, holder]);
}

/**
 * Runs `work` holding the committer lease (taken here, renewed every third of it while the work runs, as a worker
 * renews it while it commits, released after), so that what it reads of the lake is what its commit (commitLeased)
 * replaces: no worker commits in between, however long the work takes. `leases` is best a connection of its own:
 * a renewal then never waits behind the work's statements.
 */
export async function underLease<T>(deps: LeaseHolder, leases: Pick<pg.Client, 'query'>, message: string, work: () => Promise<T>): Promise<T> {
  if (!(await takeLease(leases, deps.holder, deps.leaseSeconds))) {
    throw new ChainlakeError(`another committer holds the lake's commit lease, so ${message} was not written`, {
      hint: 'run it again once the workers have committed (chainlake status --catalog shows what is pending)',
    });
  }
  const stopRenewing = keepRenewed(leases, deps.holder, deps.leaseSeconds);
  try {
    return await work();
  } finally {
    stopRenewing();
    await releaseLease(leases, deps.holder).catch(() => undefined);
  }
}
