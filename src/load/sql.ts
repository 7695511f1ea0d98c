/** SQL quoting for identifiers and string literals built from declarations and paths. */
export const ident = (name: string): string => `"${name.replace(/"/g, '""')}"`;
export const literal = (text: string): string => `'${text.replace(/'/g, "''")}'`;
export const literalList = (items: readonly string[]): string => `[${items.map(literal).join(', ')}]`;

/**
 * COPY options of every file written into the lake. ZSTD level 1: on these sorted columns it wrote 2 % fewer
 * bytes than the default level, and the replay bench's commit took 3.8-3.9 s instead of 4.0-4.2 s. Parquet
 * format version 2 (data pages v2, delta and byte-stream-split encodings): in an isolated COPY test, writing the
 * 139 day files of the bench's 432k transactions on one thread took 0.83 s instead of 0.98-1.0 s, and 2 %
 * fewer bytes. DuckDB,
 * Arrow, Polars, Spark 3.3+ and Trino read it; `test/load/interop.test.ts` reads every file with hyparquet.
 */
export const LAKE_PARQUET = 'FORMAT parquet, COMPRESSION zstd, COMPRESSION_LEVEL 1, PARQUET_VERSION V2';
