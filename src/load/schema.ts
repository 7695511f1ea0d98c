import { columnSource, rawCompanion } from '../datasets/column.js';
import { castSql, KINDS } from '../transform/kinds.js';
import type { DatasetDef } from '../datasets/dataset.js';
import { DATASETS } from '../datasets/registry.js';
import { ident, literal, literalList } from './sql.js';
import { bugError } from '../errors.js';

/** The partition value rides along in each staged row under this name. */
export const STAGED_PARTITION = '__partition';

export interface LakeColumn {
  name: string;
  type: string;
  doc: string;
}

/** The columns of a dataset's Parquet files, in file order (amount companions right after their column). */
export function lakeColumns(def: DatasetDef): LakeColumn[] {
  const out: LakeColumn[] = [];
  for (const c of def.columns) {
    out.push({ name: c.name, type: KINDS[c.kind].lakeType, doc: c.doc });
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
    parts.push(`${literal(c.name)}: ${literal(KINDS[c.kind].stagedType)}`);
    if (c.kind === 'amount') parts.push(`${literal(rawCompanion(c.name))}: 'VARCHAR'`);
  }
  parts.push(`${literal(STAGED_PARTITION)}: 'VARCHAR'`);
  return `{${parts.join(', ')}}`;
}

/** The SELECT list turning staged columns into lake columns, with the run columns as constants. */
export function typedSelectList(def: DatasetDef, runId: string, ingestedAt: string): string {
  const items: string[] = [];
  for (const c of def.columns) {
    items.push(`${castSql(c.kind, ident(c.name))} AS ${ident(c.name)}`);
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
  /**
   * Columns of the table no declaration has (another DuckLake writer added them; see mergeShape): no fetch carries
   * them, so a merge keeps the newest non-NULL value among a key's rows.
   */
  kept?: readonly string[];
}

/** A table beyond the registry (decoded events, reconciled balances) that commits declare: its shape and view documentation. */
export interface DeclaredTable {
  shape: TableShape;
  doc: string;
  partitionDoc: string;
}

/** Every table a lake holds whatever commits declared: the registry's datasets and the rejects log. */
export function lakeShapes(): TableShape[] {
  return [...Object.values(DATASETS).map(datasetShape), REJECTS_SHAPE];
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
 * (crash recovery) must not double them, hence a key made of the whole record. A decoding's rejects (window
 * `decode/<dataset>`, the log as `entry`) are one per dataset and log instead, whatever the run: a decoding
 * replaces those of the logs it decodes again, in any day (decode/rejects.ts).
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

/** No fresh row for a merge: the shape's columns and STAGED_PARTITION (a merge that only replaces or rewrites). */
export function noFreshRows(shape: TableShape): string {
  return `(SELECT *, NULL::VARCHAR AS ${ident(STAGED_PARTITION)} FROM (${emptyTypedSelect(shape)}) WHERE false)`;
}

/** A window's pages staged as received (StageFile.writePage), and where each body keeps its entries. */
export interface StagedPages {
  file: string;
  entriesAt: readonly string[];
  /** The longest line of the file, so DuckDB's reader is told to accept it. */
  maxLineBytes: number;
  /** Whether a line of the file carries its entries' `extra` texts (`x`); when none does, extra is NULL. */
  extras?: boolean;
  /** Whether a page of the file has (or may have) upper-case hex digits; unknown (undefined) counts as yes. */
  upperCaseHex?: boolean;
}

type FieldTypeTree = Map<string, FieldTypeTree | null>;

function structType(tree: FieldTypeTree): string {
  return `STRUCT(${[...tree].map(([name, child]) => `${ident(name)} ${child ? structType(child) : 'VARCHAR'}`).join(', ')})`;
}

const DEFAULT_MAX_OBJECT = 16 * 1024 * 1024;

/**
 * The typed rows of pages staged as received: the same columns as `typedSelectList` over staged rows, so the
 * two union by name. Each line is `{"p": partition, "k": {constants}, "o": [ordinals], "b": body}`; the
 * entries are unnested from the body (with their ordinals beside them) and every value is put in canonical
 * form and cast exactly as a staged row's would be.
 */
export function stagedPagesSelect(def: DatasetDef, runId: string, ingestedAt: string, pages: readonly StagedPages[]): string {
  const upperCaseHex = pages.some((p) => p.upperCaseHex !== false);
  const projection = pagesProjection(def, runId, ingestedAt, upperCaseHex);
  const ordinal = def.columns.some((c) => columnSource(c).from === 'ordinal');
  return pagesByEntriesAt(pages)
    .map((group) => pagesGroupSelect(group, projection, ordinal))
    .join(' UNION ALL ');
}

/** Stands in a PagesProjection's items where the `extra` column goes: how it is read depends on the group of files. */
const EXTRA_ITEM = '\u0000extra';

/** What a select over staged pages reads from each line and what it projects, the same for every group of files. */
interface PagesProjection {
  /** The entries' fields read, as a tree of nested names (the type of the body's list of entries). */
  readonly entryFields: FieldTypeTree;
  /** The line's constants (`k`), as STRUCT members. */
  readonly constants: readonly string[];
  /** The select list over one unnested entry (`__e`, `__o`, `__k`, `__pp`), EXTRA_ITEM standing for `extra`. */
  readonly items: readonly string[];
  /** The dataset's `extra` column, when it has one. */
  readonly extra?: string;
}

/** The dataset's columns as read from a staged page's entry, ordinal, constants or extras, in canonical form and cast as a staged row's. */
function pagesProjection(def: DatasetDef, runId: string, ingestedAt: string, upperCaseHex: boolean): PagesProjection {
  const entryFields: FieldTypeTree = new Map();
  const constants: string[] = [];
  const items: string[] = [];
  const canonicalText = new Map<string, string>();
  let extra: string | undefined;
  for (const c of def.columns) {
    const { from, path } = columnSource(c);
    let expr: string;
    if (from === 'entry') {
      addEntryField(entryFields, path);
      const value = path.reduce((acc, part) => `struct_extract(${acc}, ${literal(part)})`, '__e');
      expr = KINDS[c.kind].received?.sql(value, upperCaseHex) ?? value;
      canonicalText.set(c.name, value);
      items.push(`${castSql(c.kind, expr)} AS ${ident(c.name)}`);
      if (c.kind === 'amount') items.push(`NULL::VARCHAR AS ${ident(rawCompanion(c.name))}`);
    } else if (from === 'ordinal') {
      items.push(`${castSql(c.kind, '__o')} AS ${ident(c.name)}`);
    } else if (from === 'extra') {
      // Each entry's unread fields as JSON text, beside the entries like the ordinals (NULL for a page without).
      extra = c.name;
      items.push(EXTRA_ITEM);
    } else {
      constants.push(`${ident(c.name)} ${KINDS[c.kind].stagedType}`);
      expr = `struct_extract(__k, ${literal(c.name)})`;
      canonicalText.set(c.name, expr);
      items.push(`${castSql(c.kind, expr)} AS ${ident(c.name)}`);
      if (c.kind === 'amount') {
        constants.push(`${ident(rawCompanion(c.name))} VARCHAR`);
        items.push(`struct_extract(__k, ${literal(rawCompanion(c.name))}) AS ${ident(rawCompanion(c.name))}`);
      }
    }
  }
  items.push(`${literal(runId)} AS _run_id`);
  items.push(`CAST(${literal(ingestedAt)} AS TIMESTAMPTZ) AS _ingested_at`);
  items.push(`${def.partition === 'snapshot_date' ? '__pp' : `substr(${canonicalText.get(def.partitionFrom!)}, 1, 10)`} AS ${ident(STAGED_PARTITION)}`);
  return { entryFields, constants, items, extra };
}

/** Adds an entry field's path (its nested names) to the tree of fields read. */
function addEntryField(tree: FieldTypeTree, path: readonly string[]): void {
  let node = tree;
  path.forEach((part, i) => {
    if (i === path.length - 1) node.set(part, node.get(part) ?? null);
    else {
      let child = node.get(part);
      if (!child) node.set(part, (child = new Map()));
      node = child;
    }
  });
}

/** The pages in groups of the same path to their entries: one read_json, with one body type, per group. */
function pagesByEntriesAt(pages: readonly StagedPages[]): StagedPages[][] {
  const groups = new Map<string, StagedPages[]>();
  for (const p of pages) {
    if (p.entriesAt.length === 0) throw bugError(`staged pages ${p.file}: the body itself is the list of entries, which cannot be read per line`);
    const key = JSON.stringify(p.entriesAt);
    groups.set(key, [...(groups.get(key) ?? []), p]);
  }
  return [...groups.values()];
}

/** The typed rows of one group of staged page files: each line read with the group's types, its entries unnested and projected. */
function pagesGroupSelect(group: readonly StagedPages[], projection: PagesProjection, ordinal: boolean): string {
  const { entryFields, constants, items, extra } = projection;
  const entriesAt = group[0]!.entriesAt;
  let body = `${structType(entryFields)}[]`;
  for (let i = entriesAt.length - 1; i >= 0; i--) body = `STRUCT(${ident(entriesAt[i]!)} ${body})`;
  const columns = [`'p': 'VARCHAR'`, `'b': ${literal(body)}`];
  if (constants.length) columns.push(`'k': ${literal(`STRUCT(${constants.join(', ')})`)}`);
  if (ordinal) columns.push(`'o': 'BIGINT[]'`);
  // Only files whose pages carried extras are read for them: the others' entries all have a NULL extra.
  const withExtras = extra !== undefined && group.some((p) => p.extras);
  if (withExtras) columns.push(`'x': 'VARCHAR[]'`);
  const list = entriesAt.reduce((acc, part) => `struct_extract(${acc}, ${literal(part)})`, 'b');
  const maxObject = Math.max(DEFAULT_MAX_OBJECT, ...group.map((p) => p.maxLineBytes + 1024));
  const read = `read_json(${literalList(group.map((p) => p.file))}, format='newline_delimited', maximum_object_size=${maxObject}, columns={${columns.join(', ')}})`;
  // Two unnests in one select list walk their lists side by side: each entry beside its ordinal.
  // Unnests side by side pad the shorter list with NULLs: a page without `x` gives every entry a NULL extra.
  const unnested = `SELECT unnest(${list}) AS __e${ordinal ? ', unnest(o) AS __o' : ''}${withExtras ? ', unnest(x) AS __x' : ''}${constants.length ? ', k AS __k' : ''}, p AS __pp FROM ${read}`;
  const select = items.map((i) => (i === EXTRA_ITEM ? `${withExtras ? 'CAST(__x AS JSON)' : 'NULL::JSON'} AS ${ident(extra!)}` : i));
  return `SELECT ${select.join(', ')} FROM (${unnested})`;
}

/** The typed rows of a dataset's staged files (rows and pages as received), or throws when there are none. */
export function stagedSelect(def: DatasetDef, runId: string, ingestedAt: string, stagedFiles: readonly string[], pageFiles: readonly StagedPages[]): string {
  const staged: string[] = [];
  if (stagedFiles.length) {
    staged.push(
      `SELECT ${typedSelectList(def, runId, ingestedAt)} FROM read_json(${literalList(stagedFiles)}, format='newline_delimited', columns=${stagedColumnsSpec(def)})`,
    );
  }
  if (pageFiles.length) staged.push(stagedPagesSelect(def, runId, ingestedAt, pageFiles));
  if (staged.length === 0) throw bugError(`no staged files of ${def.name}`);
  return staged.map((s) => `(${s})`).join(' UNION ALL BY NAME ');
}
