/** SQL quoting for identifiers and string literals built from declarations and paths. */
export const ident = (name: string): string => `"${name.replace(/"/g, '""')}"`;
export const literal = (text: string): string => `'${text.replace(/'/g, "''")}'`;
export const literalList = (items: readonly string[]): string => `[${items.map(literal).join(', ')}]`;

/**
 * COPY options of every file written into the lake. ZSTD level 1 and Parquet format version 2 (data pages v2,
 * delta and byte-stream-split encodings): fewer bytes and less CPU than the defaults on these sorted columns
 * (docs/performance.md, "Lake files"). DuckDB,
 * Arrow, Polars, Spark 3.3+ and Trino read it; `test/load/interop.test.ts` reads every file with hyparquet.
 */
export const LAKE_PARQUET = 'FORMAT parquet, COMPRESSION zstd, COMPRESSION_LEVEL 1, PARQUET_VERSION V2';
