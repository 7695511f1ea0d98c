/**
 * Opening a lake of either kind for reading: the one place that knows which kind it is. A local lake's catalog
 * (load/read/reader.ts) and a distributed lake's reader (distributed/read.ts) give one connection with the same
 * tables (`runs`, `windows`, `watermarks`, `files`, `ducklake_*`, the datasets' views), so `status`, `report`,
 * `query`, `explain`, `verify` and `reconcile` read both alike. It is the read side of the lake, not of one
 * command; it sits beside distributed/ (not in load/) because a local reader may not import the distributed one
 * (docs/architecture.md, "Layers").
 */
import type { DuckDBConnection } from '@duckdb/node-api';
import type { AsOf } from '../ducklake/reader.js';
import { LakePaths } from '../load/paths.js';
import { openLakeReader } from '../load/read/reader.js';
import type { StoreConnection } from '../distributed/store.js';
import { redactUrl } from '../distributed/url.js';

/** A lake to read: a local lake's folder, or a distributed lake's control plane (and where its files are). */
export type LakeTarget = { kind: 'local'; lake: string } | { kind: 'distributed'; catalog: string; store?: string; storeConnection?: StoreConnection };

export interface OpenedLake {
  conn: DuckDBConnection;
  /** The local lake's paths, or the distributed lake's catalog URL without its password. */
  lake: LakePaths | { name: string };
  /** A local lake moved and read through temporary views (see `LakeReader.movedFrom`). */
  movedFrom?: string;
  /** A distributed lake's DuckLake snapshot the views read (a local lake's reader reads its catalog as it is). */
  snapshot?: number;
  close(): void;
}

export interface OpenLakeOptions {
  /** An earlier snapshot, by id or time. */
  asOf?: AsOf;
  /**
   * Which datasets a distributed lake gets views of: all (the default), none (`false`: the ledger and catalog
   * tables only) or the names listed. A view downloads its snapshot's files from an object store, so a reader
   * that needs no data asks for none. A local lake's views cost nothing and are always all there.
   */
  datasets?: boolean | readonly string[];
  /**
   * A local lake read by the holder of its lock (the id it holds it under): a commit left pending is finished as
   * that holder (load/read/reader.ts), not waited for. Default: a reader of its own.
   */
  by?: string;
}

/** Opens `target` read-only, with the tables both kinds of lake have. The caller closes it. */
export async function openLakeTables(target: LakeTarget, opts: OpenLakeOptions = {}): Promise<OpenedLake> {
  if (target.kind === 'local') {
    const paths = new LakePaths(target.lake);
    const reader = await openLakeReader(paths, { asOf: opts.asOf, by: opts.by });
    return { conn: reader.conn, lake: paths, movedFrom: reader.movedFrom, close: () => reader.close() };
  }
  // PostgreSQL's client loaded only for a distributed lake.
  const [{ checkCatalogUrl }, { openDistributedLake }] = await Promise.all([import('../distributed/control-plane.js'), import('../distributed/read.js')]);
  const reader = await openDistributedLake({
    catalog: checkCatalogUrl(target.catalog),
    store: target.store,
    storeConnection: target.storeConnection,
    asOf: opts.asOf,
    datasets: opts.datasets,
  });
  return { conn: reader.conn, lake: { name: redactUrl(target.catalog) }, snapshot: reader.snapshot, close: () => reader.close() };
}
