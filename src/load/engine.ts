import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';

export interface Engine {
  instance: DuckDBInstance;
  conn: DuckDBConnection;
  close(): void;
}

/**
 * An in-memory DuckDB for the run's conversions and Parquet writes. It spills to `tempDir` (inside the
 * run's staging folder) so a large merge never grows memory past `memoryLimit`.
 */
export async function openEngine(opts: { tempDir: string; memoryLimit?: string; threads?: number }): Promise<Engine> {
  const instance = await DuckDBInstance.create(':memory:', {
    threads: String(opts.threads ?? 2),
    memory_limit: opts.memoryLimit ?? '512MB',
    temp_directory: opts.tempDir,
    autoinstall_known_extensions: 'false',
    autoload_known_extensions: 'true',
  });
  const conn = await instance.connect();
  // Timestamps are UTC everywhere; set after connect, once the built-in ICU extension is loaded.
  await conn.run("SET TimeZone = 'UTC'");
  return {
    instance,
    conn,
    close() {
      conn.closeSync();
      instance.closeSync();
    },
  };
}
