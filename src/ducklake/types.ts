/**
 * Column types: DuckLake's names in `ducklake_column.column_type` (spec `data_types.md`: int64, varchar,
 * decimal(P,S), timestamptz, ...) and the DuckDB types chainlake's tables and Parquet files use.
 */
import { DuckLakeError } from './catalog-db.js';

const TO_DUCKDB: Readonly<Record<string, string>> = {
  boolean: 'BOOLEAN',
  int8: 'TINYINT',
  int16: 'SMALLINT',
  int32: 'INTEGER',
  int64: 'BIGINT',
  uint8: 'UTINYINT',
  uint16: 'USMALLINT',
  uint32: 'UINTEGER',
  uint64: 'UBIGINT',
  int128: 'HUGEINT',
  uint128: 'UHUGEINT',
  float32: 'FLOAT',
  float64: 'DOUBLE',
  time: 'TIME',
  timetz: 'TIMETZ',
  date: 'DATE',
  timestamp: 'TIMESTAMP',
  timestamptz: 'TIMESTAMP WITH TIME ZONE',
  timestamp_s: 'TIMESTAMP_S',
  timestamp_ms: 'TIMESTAMP_MS',
  timestamp_ns: 'TIMESTAMP_NS',
  interval: 'INTERVAL',
  varchar: 'VARCHAR',
  blob: 'BLOB',
  json: 'JSON',
  uuid: 'UUID',
};

const FROM_DUCKDB: Readonly<Record<string, string>> = {
  ...Object.fromEntries(Object.entries(TO_DUCKDB).map(([k, v]) => [v, k])),
  BOOL: 'boolean',
  INT1: 'int8',
  INT2: 'int16',
  INT: 'int32',
  INT4: 'int32',
  INT8: 'int64',
  LONG: 'int64',
  REAL: 'float32',
  FLOAT4: 'float32',
  FLOAT8: 'float64',
  TEXT: 'varchar',
  STRING: 'varchar',
  TIMESTAMPTZ: 'timestamptz',
  'TIMESTAMP WITH TIME ZONE': 'timestamptz',
  'TIME WITH TIME ZONE': 'timetz',
  BYTEA: 'blob',
};

const DECIMAL = /^decimal\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)$/i;

/** The DuckDB type of a DuckLake column type (primitive types; nested types are rejected by name). */
export function duckdbTypeOf(ducklakeType: string, where: string): string {
  const decimal = DECIMAL.exec(ducklakeType);
  if (decimal) return `DECIMAL(${decimal[1]}, ${decimal[2]})`;
  const type = TO_DUCKDB[ducklakeType.toLowerCase()];
  if (!type) throw new DuckLakeError(`${where}: column type '${ducklakeType}' is not one chainlake reads yet (nested, variant and geometry types are not)`);
  return type;
}

/** The DuckLake type name of a DuckDB column type (`BIGINT` -> `int64`, `DECIMAL(38,0)` -> `decimal(38,0)`). */
export function ducklakeTypeOf(duckdbType: string, where: string): string {
  const decimal = DECIMAL.exec(duckdbType.trim());
  if (decimal) return `decimal(${decimal[1]},${decimal[2]})`;
  const type = FROM_DUCKDB[duckdbType.trim().toUpperCase()];
  if (!type) throw new DuckLakeError(`${where}: DuckDB type ${duckdbType} has no DuckLake primitive type here (nested types are not written yet)`);
  return type;
}
