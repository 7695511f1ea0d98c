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

/** A column's type as DuckLake stores it: a type name, and for nested types the child columns (by name). */
export interface TypeTree {
  readonly type: string;
  readonly children: readonly (TypeTree & { readonly name: string })[];
}

/**
 * The DuckLake type tree of a DuckDB column type. Lists (`INTEGER[]`, nested lists too) become a `list` column
 * with one child `element`, as the spec's data_types.md describes; other nested types are not written yet.
 */
export function ducklakeTypeTree(duckdbType: string, where: string): TypeTree {
  const type = duckdbType.trim();
  if (type.endsWith('[]')) return { type: 'list', children: [{ name: 'element', ...ducklakeTypeTree(type.slice(0, -2), where) }] };
  const struct = /^STRUCT\s*\((.*)\)$/is.exec(type);
  if (struct) {
    const fields = splitTopLevel(struct[1]!).map((field) => {
      const m = /^\s*(?:"((?:[^"]|"")*)"|([A-Za-z_][A-Za-z0-9_]*))\s+(.+)$/s.exec(field);
      if (!m) throw new DuckLakeError(`${where}: cannot read the struct field '${field.trim()}'`);
      const name = m[1] !== undefined ? m[1].replace(/""/g, '"') : m[2]!;
      return { name, ...ducklakeTypeTree(m[3]!, `${where}.${name}`) };
    });
    if (fields.length === 0) throw new DuckLakeError(`${where}: a struct without fields`);
    return { type: 'struct', children: fields };
  }
  return { type: ducklakeTypeOf(type, where), children: [] };
}

/** `a INT, b DECIMAL(38, 0), c STRUCT(x INT, y INT)` split at the commas outside parentheses and quotes. */
function splitTopLevel(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let quoted = false;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (ch === '"') quoted = !quoted;
    else if (!quoted && ch === '(') depth++;
    else if (!quoted && ch === ')') depth--;
    else if (!quoted && depth === 0 && ch === ',') {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
  }
  if (text.slice(start).trim()) parts.push(text.slice(start));
  return parts;
}

const sqlIdent = (name: string): string => `"${name.replace(/"/g, '""')}"`;

/** The DuckDB type of a column with its children: `list` -> `T[]`, `struct` -> `STRUCT(...)`, `map` -> `MAP(K, V)`. */
export function duckdbTypeOfTree(column: TypeTree, where: string): string {
  const kids = column.children;
  switch (column.type) {
    case 'list':
      if (kids.length !== 1) throw new DuckLakeError(`${where}: a list column has ${kids.length} child columns instead of 1`);
      return `${duckdbTypeOfTree(kids[0]!, where)}[]`;
    case 'struct':
      if (kids.length === 0) throw new DuckLakeError(`${where}: a struct column has no child columns`);
      return `STRUCT(${kids.map((k) => `${sqlIdent(k.name)} ${duckdbTypeOfTree(k, `${where}.${k.name}`)}`).join(', ')})`;
    case 'map':
      if (kids.length !== 2) throw new DuckLakeError(`${where}: a map column has ${kids.length} child columns instead of 2`);
      return `MAP(${duckdbTypeOfTree(kids[0]!, where)}, ${duckdbTypeOfTree(kids[1]!, where)})`;
    default:
      if (kids.length) throw new DuckLakeError(`${where}: a ${column.type} column has child columns`);
      return duckdbTypeOf(column.type, where);
  }
}
