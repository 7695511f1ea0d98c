/**
 * A distributed lake's current rows, as its committer, decoding and compaction read them: through the one reader of
 * both modes (LakeState, load/write/lake-state.ts), given what is this lake's own: its files reach this machine as
 * copies from the store, and the rows other DuckLake writers inlined into the PostgreSQL catalog are copied into the
 * engine to write a changed partition out.
 */
import type { DuckDBConnection } from '@duckdb/node-api';
import type { CatalogDb } from '../ducklake/catalog-db.js';
import type { TableShape } from '../load/schema.js';
import { readLakeState, type LakeState } from '../load/write/lake-state.js';
import type { Store } from './store.js';

/** The catalog and the store a lake's rows are read from. */
export interface LakeDeps {
  catalog: CatalogDb;
  store: Store;
}

/**
 * The lake's current files of `only`'s tables (all of them without it; with `spans`, their block spans too), a
 * partition another writer changed written out under `workDir` on `conn`.
 */
export function readLake(deps: LakeDeps, conn: DuckDBConnection, workDir: string, only?: readonly TableShape[], spans = false): Promise<LakeState> {
  const { catalog, store } = deps;
  const access = (file: string) => store.localCopy(store.lakeLocation(file));
  return readLakeState(catalog, store.localDataPath, [], { workDir, engine: conn, access, spans, ...(only ? { only } : {}) });
}
