/**
 * Reading a distributed lake: one DuckDB view per table of a snapshot (the newest, or `--as-of` a snapshot id or
 * a time), each over exactly the files that snapshot lists. A snapshot's file list never changes once committed,
 * so a query sees one whole snapshot even while the committer goes on.
 */
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { dataPathOf, listTables, planScan, resolveSnapshot, type AsOf } from '../ducklake/reader.js';
import { ident } from '../load/sql.js';
import { openCatalog } from './control-plane.js';
import { ChainlakeError } from '../errors.js';
import { openStore, storeLocationOf } from './store.js';

export interface DistributedLake {
  conn: DuckDBConnection;
  snapshot: number;
  tables: string[];
  close(): void;
}

export { parseAsOf } from '../load/reader.js';

export async function openDistributedLake(opts: { catalog: string; store?: string; asOf?: AsOf }): Promise<DistributedLake> {
  const { client, catalog } = await openCatalog(opts.catalog);
  let store: Awaited<ReturnType<typeof openStore>> | undefined;
  try {
    // The files as this machine reaches them: the store it names, else the one the catalog records.
    store = await openStore(opts.store ?? storeLocationOf(await dataPathOf(catalog)));
    const dataPath = store.localDataPath;
    const snapshot = await resolveSnapshot(catalog, opts.asOf).catch((e: Error) => {
      throw new ChainlakeError(`cannot read the lake at ${describeAsOf(opts.asOf)}: ${e.message}`, { code: 'CHAINLAKE_USAGE' });
    });
    const tables = await listTables(catalog, snapshot.snapshotId);
    const instance = await DuckDBInstance.create(':memory:', { autoinstall_known_extensions: 'false' });
    const conn = await instance.connect();
    await conn.run("SET TimeZone = 'UTC'");
    for (const t of tables) {
      const scan = await planScan(catalog, t.name, { asOf: { snapshot: snapshot.snapshotId }, schema: t.schema.name, dataPath });
      for (const f of scan.files) {
        await store.localCopy(store.lakeLocation(f.path));
        if (f.deleteFile) await store.localCopy(store.lakeLocation(f.deleteFile.path));
      }
      await conn.run(`CREATE VIEW ${ident(t.name)} AS ${scan.sql}`);
    }
    const held = store;
    store = undefined;
    return {
      conn,
      snapshot: snapshot.snapshotId,
      tables: tables.map((t) => t.name),
      close() {
        conn.closeSync();
        instance.closeSync();
        void held.close();
      },
    };
  } finally {
    await store?.close();
    await client.end().catch(() => undefined);
  }
}

function describeAsOf(asOf: AsOf): string {
  if (!asOf) return 'its newest snapshot';
  return 'snapshot' in asOf ? `snapshot ${asOf.snapshot}` : `time ${asOf.time.toISOString()}`;
}
