import type { DuckDBConnection } from '@duckdb/node-api';
import { DuckDBInstance } from '../ducklake/node-api.js';

export interface Engine {
  instance: DuckDBInstance;
  conn: DuckDBConnection;
  /** DuckDB's threads as opened; `SET threads` may lower it to one (see BatchCommitter: a run's engine is opened with one). */
  threads: number;
  /** Another connection to the same database, in UTC like `conn` (loaders, partition writers). */
  connect(): Promise<DuckDBConnection>;
  close(): void;
}

/**
 * DuckDB's buffer pool; beyond it DuckDB spills to `tempDir`. Its real footprint runs well above this (reader
 * and writer buffers outside the pool, freed pages its allocator keeps), and the pool fills up to it (merged
 * tables, sorts), so it decides most of a run's peak RSS. The limit holds what is pinned at once now that a
 * commit merges slices of MERGE_SLICE_ROWS and typed files have small row groups (TYPED_ROW_GROUP_ROWS); less
 * ran out of memory now and then (docs/performance.md, "DuckDB's memory").
 */
export const DEFAULT_MEMORY_LIMIT = '160MB';

/**
 * An in-memory DuckDB for the run's conversions and Parquet writes. It spills to `tempDir` (inside the
 * run's staging folder) so a large merge never grows memory past `memoryLimit`.
 */
export async function openEngine(opts: { tempDir: string; memoryLimit?: string; threads?: number }): Promise<Engine> {
  const threads = opts.threads ?? 2;
  const instance = await DuckDBInstance.create(':memory:', {
    threads: String(threads),
    memory_limit: opts.memoryLimit ?? DEFAULT_MEMORY_LIMIT,
    temp_directory: opts.tempDir,
    autoinstall_known_extensions: 'false',
    autoload_known_extensions: 'true',
    // The cache of files read keeps their bytes in the pool (docs/performance.md, "DuckDB's memory"): typed and lake files late in the
    // 5M-row memory bench, each read once per slice, where the reads cost no measurable time without it.
    enable_external_file_cache: 'false',
  });
  const connect = async (): Promise<DuckDBConnection> => {
    const c = await instance.connect();
    // Timestamps are UTC everywhere; set after connect, once the built-in ICU extension is loaded.
    await c.run("SET TimeZone = 'UTC'");
    return c;
  };
  const conn = await connect();
  return {
    instance,
    conn,
    threads,
    connect,
    close() {
      conn.closeSync();
      instance.closeSync();
    },
  };
}

/**
 * Creates the temporary table `table` from `select` without keeping the rows in read order. Kept, DuckDB holds
 * each file's rows in memory until the files before it are in, and a read of a few hundred files of wide rows
 * outgrows the engine's memory; unordered, what does not fit spills (docs/performance.md, "Distributed", "The
 * committer's memory"). For tables whose rows' order matters nowhere; the setting is the connection's own and is
 * restored at once (a sorted table read by row-id ranges relies on it).
 */
export async function createUnorderedTempTable(conn: DuckDBConnection, table: string, select: string): Promise<void> {
  await conn.run(`SET preserve_insertion_order = false`);
  try {
    await conn.run(`CREATE OR REPLACE TEMP TABLE ${table} AS ${select}`);
  } finally {
    await conn.run(`RESET preserve_insertion_order`);
  }
}
