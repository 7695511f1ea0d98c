/**
 * The logical column kinds of design §3. A dataset declares each column with one of these; every stage
 * derives its own behaviour from the kind's one entry in transform/kinds.ts (conversion, validation, what may
 * be staged as received, staging type, SQL cast, the lake's DuckDB type), so a kind means the same thing
 * everywhere.
 */
export type ColumnKind =
  | 'address' // 0x + 40 hex, lower-cased
  | 'hash' // 0x + 64 hex, lower-cased
  | 'hex' // 0x + any even-or-odd hex payload (input data, bytecode), lower-cased
  | 'bigint' // integer that must fit a signed 64-bit BIGINT; larger is a reject, never wrapped
  | 'amount' // non-negative integer in the smallest unit: DECIMAL(38,0), or NULL plus <name>_raw when >= 10^38
  | 'timestamp' // ISO 8601 text, or epoch milliseconds as a JSON number: TIMESTAMPTZ in UTC
  | 'bool' // 0/1 flags (as strings or numbers) and JSON booleans
  | 'text' // free text, kept exactly
  | 'int_array' // list of small integers given as strings or numbers (trace_address)
  | 'json' // any JSON value (ABI), stored as DuckDB JSON
  | 'double'; // finance figures given as JSON numbers (or numeric strings)

export interface ColumnDef {
  /** Column name in the lake (snake_case). */
  name: string;
  /**
   * Where the value comes from; defaults to `name`. A field of the API entry (a dotted path reads nested
   * objects: `24h.volume`), or `$scope.<key>` (the window's scope), `$results.<path>` (the page's results beside
   * the entries), `$meta.<key>` (the endpoint's constants, `endpoint` its id, `found`/`api_message` for
   * absent records), `$ordinal` (the entry's ordinal among identical entries, see OrdinalDef), or `$extra`
   * (the entry's fields no other column reads: the registry gives every dataset this column, `extra`).
   */
  source?: string;
  kind: ColumnKind;
  /** A NULL (or absent) value in a non-nullable column makes the row a reject. */
  nullable: boolean;
  /** Text columns only: the value must match (e.g. decimal token ids); anything else is a reject. */
  pattern?: RegExp;
  doc: string;
}

/** Companion column holding the exact text of an amount that does not fit DECIMAL(38,0). */
export const rawCompanion = (name: string): string => `${name}_raw`;

/** Where a column's value is read: a field (path) of the API entry, or a value beside the entries. */
export type SourceKind = 'entry' | 'scope' | 'results' | 'meta' | 'ordinal' | 'extra';

const SOURCE_PREFIXES: [string, SourceKind][] = [
  ['$scope', 'scope'],
  ['$results', 'results'],
  ['$meta', 'meta'],
  ['$ordinal', 'ordinal'],
  ['$extra', 'extra'],
];

/** The column every dataset ends with: an entry's fields that no column reads, exactly as received. */
export const EXTRA_COLUMN = 'extra';

export const extraColumn: ColumnDef = {
  name: EXTRA_COLUMN,
  source: '$extra',
  kind: 'json',
  nullable: true,
  doc: "The entry’s fields that no column reads (fields the spec does not list), as a JSON object of their values as received; NULL when there are none. Query with ->> / json_extract, e.g. extra->>'id'.",
};

/** The column's source as a kind and a path (the entry's field path, or the path below `$scope` etc.). */
export function columnSource(def: ColumnDef): { from: SourceKind; path: string[] } {
  const source = def.source ?? def.name;
  const from = SOURCE_PREFIXES.find(([prefix]) => source === prefix || source.startsWith(`${prefix}.`))?.[1] ?? 'entry';
  return { from, path: from === 'entry' ? source.split('.') : from === 'ordinal' || from === 'extra' ? [] : source.slice(source.indexOf('.') + 1).split('.') };
}
