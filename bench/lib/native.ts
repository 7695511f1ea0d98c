// DuckDB's own path, the reference of scenarios 2 and 6: NDJSON of the API's entries read by `read_json` and
// cast to the lake's types in one vectorised query, written as ZSTD Parquet partitioned by day.

import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import type { DatasetDef } from '../../src/datasets/dataset.js';
import { KINDS } from '../../src/transform/kinds.js';

const q = (s: string): string => `'${s.replace(/'/g, "''")}'`;
const id = (s: string): string => `"${s.replace(/"/g, '""')}"`;

/** The typed SELECT list of DuckDB's native path: the same types as the lake, straight from the API's strings. */
export function nativeSelect(def: DatasetDef): { columns: string; select: string } {
  const cols: string[] = [];
  const items: string[] = [];
  for (const c of def.columns) {
    const source = c.source ?? c.name;
    if (source.startsWith('$')) continue; // scope, results and ordinals are the pipeline's own
    cols.push(`${q(source)}: 'VARCHAR'`);
    const x = id(source);
    let e: string;
    switch (c.kind) {
      case 'address':
      case 'hash':
      case 'hex':
        e = `lower(${x})`;
        break;
      case 'bigint':
        e = `CAST(${x} AS BIGINT)`;
        break;
      case 'amount':
        // The same fast route as ours (HUGEINT first); TRY_ so 2^256-1 becomes NULL instead of failing.
        e = `TRY_CAST(TRY_CAST(${x} AS HUGEINT) AS DECIMAL(38,0))`;
        break;
      case 'timestamp':
        e = `CAST(${x} AS TIMESTAMPTZ)`;
        break;
      case 'bool':
        e = `(${x} IN ('1', 'true'))`;
        break;
      case 'json':
        e = `CAST(${x} AS JSON)`;
        break;
      case 'double':
        e = `CAST(${x} AS DOUBLE)`;
        break;
      default:
        e = `CAST(${x} AS ${KINDS[c.kind].lakeType})`;
    }
    items.push(`${e} AS ${id(c.name)}`);
  }
  const ts = def.partitionFrom ? id(def.columns.find((c) => c.name === def.partitionFrom)!.source ?? def.partitionFrom) : undefined;
  if (ts) items.push(`CAST(CAST(${ts} AS TIMESTAMPTZ) AS DATE) AS block_date`);
  return { columns: `{${cols.join(', ')}}`, select: items.join(', ') };
}

export async function withDuckDB<T>(fn: (run: (sql: string) => Promise<unknown[][]>) => Promise<T>): Promise<T> {
  const instance = await DuckDBInstance.create(':memory:');
  const conn = await instance.connect();
  await conn.run("SET TimeZone = 'UTC'");
  try {
    return await fn(async (sql) => (await conn.runAndReadAll(sql)).getRowsJS() as unknown[][]);
  } finally {
    conn.closeSync();
    instance.closeSync();
  }
}

/** NDJSON of one dataset's entries -> typed ZSTD Parquet partitioned by block_date; returns rows written. */
export async function nativeCopy(run: (sql: string) => Promise<unknown[][]>, def: DatasetDef, ndjson: string, outDir: string): Promise<number> {
  const { columns, select } = nativeSelect(def);
  await mkdir(path.dirname(outDir), { recursive: true });
  const rows = await run(
    `COPY (SELECT ${select} FROM read_json(${q(ndjson)}, format='newline_delimited', columns=${columns}))
     TO ${q(outDir)} (FORMAT parquet, COMPRESSION zstd, PARTITION_BY (block_date))`,
  );
  return Number(rows[0]?.[0] ?? 0);
}
