import { DUCKDB_TYPE, rawCompanion, type ColumnKind } from '../datasets/column.js';
import type { DatasetDef } from '../datasets/dataset.js';
import { ident, literal } from './sql.js';

/** The partition value rides along in each staged row under this name. */
export const STAGED_PARTITION = '__partition';

/** How each kind is staged in NDJSON (the type read_json reads it as). */
const STAGED_TYPE: Record<ColumnKind, string> = {
  address: 'VARCHAR',
  hash: 'VARCHAR',
  hex: 'VARCHAR',
  bigint: 'VARCHAR',
  amount: 'VARCHAR',
  timestamp: 'VARCHAR',
  bool: 'BOOLEAN',
  text: 'VARCHAR',
  int_array: 'INTEGER[]',
  json: 'VARCHAR',
  double: 'DOUBLE',
};

/**
 * The cast from the staged value to the lake type. Amounts go through HUGEINT: DuckDB's direct
 * VARCHAR -> DECIMAL cast is ~500x slower (design §3), and the transform has already sent anything over
 * 38 digits to the `_raw` companion, so the HUGEINT cast cannot overflow.
 */
function castExpr(kind: ColumnKind, col: string): string {
  const c = ident(col);
  switch (kind) {
    case 'bigint':
      return `CAST(${c} AS BIGINT)`;
    case 'amount':
      return `CAST(CAST(${c} AS HUGEINT) AS DECIMAL(38,0))`;
    case 'timestamp':
      return `CAST(${c} AS TIMESTAMPTZ)`;
    case 'json':
      return `CAST(${c} AS JSON)`;
    default:
      return c;
  }
}

export interface LakeColumn {
  name: string;
  type: string;
  doc: string;
}

/** The columns of a dataset's Parquet files, in file order (amount companions right after their column). */
export function lakeColumns(def: DatasetDef): LakeColumn[] {
  const out: LakeColumn[] = [];
  for (const c of def.columns) {
    out.push({ name: c.name, type: DUCKDB_TYPE[c.kind], doc: c.doc });
    if (c.kind === 'amount') {
      out.push({
        name: rawCompanion(c.name),
        type: 'VARCHAR',
        doc: `Exact decimal text of ${c.name} when it is >= 10^38 (then ${c.name} is NULL); NULL otherwise.`,
      });
    }
  }
  out.push({ name: '_run_id', type: 'VARCHAR', doc: 'The chainlake run that wrote this row.' });
  out.push({ name: '_ingested_at', type: 'TIMESTAMP WITH TIME ZONE', doc: 'When that run fetched the row (UTC).' });
  return out;
}

/** `columns={...}` for read_json over a dataset's staged NDJSON. */
export function stagedColumnsSpec(def: DatasetDef): string {
  const parts: string[] = [];
  for (const c of def.columns) {
    parts.push(`${literal(c.name)}: ${literal(STAGED_TYPE[c.kind])}`);
    if (c.kind === 'amount') parts.push(`${literal(rawCompanion(c.name))}: 'VARCHAR'`);
  }
  parts.push(`${literal(STAGED_PARTITION)}: 'VARCHAR'`);
  return `{${parts.join(', ')}}`;
}

/** The SELECT list turning staged columns into lake columns, with the run columns as constants. */
export function typedSelectList(def: DatasetDef, runId: string, ingestedAt: string): string {
  const items: string[] = [];
  for (const c of def.columns) {
    items.push(`${castExpr(c.kind, c.name)} AS ${ident(c.name)}`);
    if (c.kind === 'amount') items.push(ident(rawCompanion(c.name)));
  }
  items.push(`${literal(runId)} AS _run_id`);
  items.push(`CAST(${literal(ingestedAt)} AS TIMESTAMPTZ) AS _ingested_at`);
  items.push(ident(STAGED_PARTITION));
  return items.join(', ');
}

/**
 * What the merge needs to know about a table in the lake: its columns (in file order), the natural key, the
 * sort order and the block column for file statistics. Datasets and the `_rejects` log both have one.
 */
export interface TableShape {
  name: string;
  columns: LakeColumn[];
  key: string[];
  order: string[];
  blockColumn?: string;
  /** Hive partition column after `network`. */
  partition: string;
}

export function datasetShape(def: DatasetDef): TableShape {
  return {
    name: def.name,
    columns: lakeColumns(def),
    key: def.naturalKey,
    order: def.sortBy,
    blockColumn: def.blockColumn,
    partition: def.partition,
  };
}

export const REJECTS_DATASET = '_rejects';

/**
 * Rejects are a log partitioned by the date of the run that saw them, one file per day. A re-applied commit
 * (crash recovery) must not double them, hence a key made of the whole record.
 */
export const REJECTS_SHAPE: TableShape = {
  name: REJECTS_DATASET,
  columns: [
    { name: 'dataset', type: 'VARCHAR', doc: 'Dataset the row was meant for.' },
    { name: 'window', type: 'VARCHAR', doc: 'Window (dataset/network/scope/range) that fetched it.' },
    { name: 'field', type: 'VARCHAR', doc: 'Column that did not convert.' },
    { name: 'raw_value', type: 'VARCHAR', doc: 'The value as the API gave it (JSON text).' },
    { name: 'reason', type: 'VARCHAR', doc: 'Why it did not convert.' },
    { name: 'entry', type: 'JSON', doc: 'The whole API entry, untouched.' },
    { name: '_run_id', type: 'VARCHAR', doc: 'The chainlake run that saw it.' },
    { name: '_ingested_at', type: 'TIMESTAMP WITH TIME ZONE', doc: 'When that run fetched it (UTC).' },
  ],
  key: ['_run_id', 'dataset', 'window', 'field', 'raw_value', 'reason', 'entry'],
  order: ['_ingested_at', 'dataset', 'window', 'field'],
  partition: 'run_date',
};

/** A relation with the shape's columns and types and no row: the anchor of merges and of empty views. */
export function emptyTypedSelect(shape: TableShape, extra: LakeColumn[] = []): string {
  return `SELECT ${[...shape.columns, ...extra].map((c) => `CAST(NULL AS ${c.type}) AS ${ident(c.name)}`).join(', ')} WHERE false`;
}
