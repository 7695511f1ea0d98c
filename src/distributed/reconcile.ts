// `chainlake reconcile --catalog` on a distributed lake: the reconciliation computed by the same statement as on one
// machine (load/read/reconcile.ts, over the lake's views), its rows built into the same table
// (load/write/reconcile-lake.ts), then committed as the `reconciliation` table by the distributed committer's merge
// (distributed/commit.ts, commitDerived) under the committer lease.

import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { dataPathOf } from '../ducklake/reader.js';
import { openEngine } from '../load/engine.js';
import { newMaintenanceId } from '../load/ids.js';
import { RECONCILIATION_TABLE, summarize, type GenesisAllocations, type ReconcileSummary, type ReconciliationRow } from '../load/read/reconcile.js';
import { STAGED_PARTITION } from '../load/schema.js';
import { ident, literal } from '../load/sql.js';
import { reconcileRun, reconciliationTable } from '../load/write/reconcile-lake.js';
import { recordRun } from '../load/ledger/runs.js';
import { reconciliationOf } from '../lake/reconcile.js';
import { silentLogger } from '../pipeline/log.js';
import { commitDerived } from './commit.js';
import { CONTROL_SCHEMA, openCatalog } from './control-plane.js';
import { openStore, storeLocationOf, type StoreConnection } from './store.js';
import { commitMessage } from '../load/catalog.js';

/** Long enough for a large table's merge; renewed by nothing, so it bounds how long a crashed reconcile holds it. */
const LEASE_SECONDS = 600;

export interface ReconcileDistributedResult extends ReconcileSummary {
  runId: string;
  /** The DuckLake snapshot the balances were computed over, and the one that holds the table. */
  readSnapshot: number;
  snapshotId: number;
  files: number;
  rowsOut: ReconciliationRow[];
}

export async function reconcileDistributedLake(opts: {
  catalog: string;
  store?: string;
  storeConnection?: StoreConnection;
  genesis?: GenesisAllocations;
}): Promise<ReconcileDistributedResult> {
  // Read as every command reads a lake, as a local reconcile reads it (lake/reconcile.ts); only where the table is
  // committed is this mode's own.
  const { rows, snapshot } = await reconciliationOf(
    { kind: 'distributed', catalog: opts.catalog, store: opts.store, storeConnection: opts.storeConnection },
    { genesis: opts.genesis },
  );
  const readSnapshot = snapshot!;
  const runId = newMaintenanceId('reconcile');
  const ingestedAt = new Date().toISOString();
  const { client, catalog } = await openCatalog(opts.catalog);
  const scratch = await mkdtemp(path.join(os.tmpdir(), 'chainlake-reconcile-'));
  const fragments = new Map<string, string[]>();
  try {
    const store = await openStore(opts.store ?? storeLocationOf(await dataPathOf(catalog)), opts.storeConnection);
    const engine = await openEngine({ tempDir: path.join(scratch, 'duckdb-tmp') });
    try {
      await reconciliationTable(engine.conn, 'reconciliation_fresh', rows, runId, ingestedAt);
      for (const network of [...new Set(rows.map((r) => r.network))]) {
        const target = await store.fragmentTarget(runId, `reconciliation-${network}.parquet`);
        await engine.conn.run(
          `COPY (SELECT * EXCLUDE (network) FROM reconciliation_fresh WHERE network = ${literal(network)} ORDER BY ${ident(STAGED_PARTITION)})
           TO ${literal(target.writePath)} (FORMAT parquet)`,
        );
        await store.putFragment(target);
        fragments.set(network, [target.location]);
      }
      const deps = { catalog, engine, store, holder: runId, leaseSeconds: LEASE_SECONDS, log: silentLogger };
      // Recorded as a run of its own in the snapshot's transaction, as a local reconciliation is.
      const committed = await commitDerived(deps, client, RECONCILIATION_TABLE, fragments, commitMessage([runId], 'reconcile'), {
        record: (tx, c) => recordRun({ db: tx, schema: CONTROL_SCHEMA }, reconcileRun(runId, ingestedAt, { ...summarize(rows), files: c.files })),
      });
      return { runId, ...summarize(rows), readSnapshot, snapshotId: committed.snapshotId, files: committed.files, rowsOut: rows };
    } finally {
      engine.close();
      for (const files of fragments.values()) for (const f of files) await store.remove(f).catch(() => undefined);
      await store.close();
    }
  } finally {
    await client.end();
    await rm(scratch, { recursive: true, force: true });
  }
}
