import type { DatasetDef, EndpointDef } from './dataset.js';
import { bugError } from '../errors.js';

/** A window's listing as the lake holds it: the endpoint, the scope and the block range it was asked for. */
export interface ScopeRange {
  endpoint: EndpointDef;
  scope: Record<string, string>;
  range: { from: number; to: number };
  /**
   * The times (UTC, ISO 8601) of the range's first and last block, for a dataset whose rows carry a block time but
   * no block number (DatasetDef.blockTimeColumn): its rows of the range are those between them.
   */
  times?: { from: string; to: string };
}

/**
 * Whether the lake can tell the rows a window of `endpoint` listed: the dataset's rows carry a block number (or a
 * block time, with the window's block times known) and the endpoint declares the columns its scope filters on
 * (EndpointDef.scopeColumns, and scopeTopics).
 */
export function replaceable(def: DatasetDef, endpoint: EndpointDef): boolean {
  return (def.blockColumn !== undefined || def.blockTimeColumn !== undefined) && endpoint.blockRange !== undefined && endpoint.scopeColumns !== undefined;
}

/** Whether the lake can tell the rows of this window (a window of a block-time dataset needs its block times). */
const rangeKnown = (def: DatasetDef, w: ScopeRange): boolean => replaceable(def, w.endpoint) && (def.blockColumn !== undefined || w.times !== undefined);

/** A value of a row of the table of replaced windows (ScopeRowsTable.rows). */
export type ScopeRowsValue = string | number | boolean | null;

/**
 * The windows a commit replaces as a table and a condition joining it, so that the condition's plan and memory stay
 * the same whatever the number of windows and scope values: one semi-join per endpoint and combination of scope
 * columns, each against the table's rows (written as constants, each list of values or each window's range was a
 * term of its own, and DuckDB planned each list of constants as a join with a hash table of its own: a commit
 * replacing many windows of many addresses ran the engine out of memory).
 */
export interface ScopeRowsTable {
  /** The table's columns and their SQL types (names no dataset column has: the condition refers to both). */
  columns: readonly (readonly [name: string, type: string])[];
  /** One row per replaceable window, in `columns` order. */
  rows: readonly (readonly ScopeRowsValue[])[];
  /**
   * A SQL condition on rows of the dataset (columns by name) given the table's name: true for a row one of the
   * windows listed. It may be NULL for a row (a NULL endpoint column): callers coalesce it.
   */
  held(table: string): string;
}

const W = '"__chainlake_w"';
const col = (name: string): string => `${W}.${ident(name)}`;

/**
 * The windows of `windows` whose rows the lake can tell (replaceable, with block times where the dataset needs them)
 * as a ScopeRowsTable. A row is a window's when it is inside the window's block range (on the block column, or between
 * its blocks' times), for every scope key one of the key's columns holds the key's value (lower-cased in address and
 * hash columns), its topics match as the API applies them (EndpointDef.scopeTopics, topicsOf), and, where the
 * dataset records which endpoint gave a row (a column of source `$meta.endpoint`), given by the window's endpoint.
 * Undefined when no window is replaceable.
 */
export function scopeRowsTable(def: DatasetDef, windows: readonly ScopeRange[]): ScopeRowsTable | undefined {
  const lowerCase = new Set(def.columns.filter((c) => c.kind === 'address' || c.kind === 'hash').map((c) => c.name));
  const endpointColumn = def.columns.find((c) => c.source === '$meta.endpoint')?.name;
  const known = windows.filter((w) => rangeKnown(def, w));
  if (known.length === 0) return undefined;
  const endpoints = [...new Map(known.map((w) => [w.endpoint.id, w.endpoint])).values()];
  const keysOf = (e: EndpointDef): string[] => Object.keys(e.scopeColumns!).sort();
  const scopeKeys = Math.max(...endpoints.map((e) => keysOf(e).length));
  const topicKeys = Math.max(...endpoints.map((e) => e.scopeTopics?.length ?? 0));
  const byTime = def.blockColumn === undefined;
  const columns: [string, string][] = [
    ['endpoint', 'VARCHAR'],
    // Each scope key's value as given and lower-cased: a key's columns may differ in kind.
    ...Array.from({ length: scopeKeys }, (_, i) => [[`value_${i}`, 'VARCHAR'] as [string, string], [`lower_${i}`, 'VARCHAR'] as [string, string]]).flat(),
    ...(byTime
      ? [['time_from', 'TIMESTAMPTZ'] as [string, string], ['time_to', 'TIMESTAMPTZ'] as [string, string]]
      : [['block_from', 'BIGINT'] as [string, string], ['block_to', 'BIGINT'] as [string, string]]),
    ...Array.from({ length: topicKeys }, (_, i) => [`topic_${i}`, 'VARCHAR'] as [string, string]),
    ['topics_combined', 'BOOLEAN'],
    ['topics_any', 'BOOLEAN'],
  ].map(([name, type]) => [`__chainlake_w_${name}`, type] as [string, string]);
  const rows = known.map((w) => {
    const keys = keysOf(w.endpoint);
    for (const k of keys) if (w.scope[k] === undefined) throw bugError(`${def.name}: a window of ${w.endpoint.id} has no scope value ${k}`);
    const values = Array.from({ length: scopeKeys }, (_, i) =>
      i < keys.length ? [w.scope[keys[i]!]!, w.scope[keys[i]!]!.toLowerCase()] : [null, null],
    ).flat();
    const topics = topicsOf(w.endpoint, w.scope);
    return [
      w.endpoint.id,
      ...values,
      ...(byTime ? [w.times!.from, w.times!.to] : [w.range.from, w.range.to]),
      ...Array.from({ length: topicKeys }, (_, i) => topics.given[i] ?? null),
      topics.combined,
      topics.any,
    ];
  });
  const name = (suffix: string): string => col(`__chainlake_w_${suffix}`);
  const inRange = byTime
    ? `${ident(def.blockTimeColumn!)} BETWEEN ${name('time_from')} AND ${name('time_to')}`
    : `${ident(def.blockColumn!)} BETWEEN ${name('block_from')} AND ${name('block_to')}`;
  const held = (table: string): string =>
    endpoints
      .flatMap((e) => {
        const keys = keysOf(e);
        // A row is a window's when each key's value is in one of its columns: one semi-join per choice of a column
        // for each key, so that each joins on equalities (a hash join on the table's rows).
        const choices = keys.reduce<string[][]>((acc, k) => acc.flatMap((chosen) => e.scopeColumns![k]!.map((c) => [...chosen, c])), [[]]);
        const rest = [`${name('endpoint')} = ${literal(e.id)}`, inRange, ...(e.scopeTopics ? [topicsHeld(e.scopeTopics, name)] : [])];
        return choices.map((chosen) => {
          const equal = chosen.map((c, i) => `${ident(c)} = ${name(`${lowerCase.has(c) ? 'lower' : 'value'}_${i}`)}`);
          const exists = `EXISTS (SELECT 1 FROM ${table} AS ${W} WHERE ${[...equal, ...rest].join(' AND ')})`;
          return endpointColumn ? `(${ident(endpointColumn)} = ${literal(e.id)} AND ${exists})` : exists;
        });
      })
      .join(' OR ');
  return { columns, rows, held };
}

/**
 * The topics of a window of an endpoint declaring scopeTopics, as the API applies them (explorer #18): topic 0 equal
 * when given; with `type` combine (the default when another topic is given) the other given topics combined by
 * `operand`. `given`: each topic's value (lower-cased) or null; `combined`: the other topics apply; `any`: by `or`.
 */
function topicsOf(endpoint: EndpointDef, scope: Record<string, string>): { given: (string | null)[]; combined: boolean; any: boolean } {
  const given = (endpoint.scopeTopics ?? []).map(([key]) => (scope[key] ? scope[key].toLowerCase() : null));
  const others = given.slice(1).filter((v) => v !== null).length;
  const combined = (scope.type ?? (others > 0 ? 'combine' : 'single')) === 'combine' && others > 0;
  return { given, combined, any: scope.operand === 'or' };
}

/** The condition topicsOf's columns of a window put on a row's topic columns. */
function topicsHeld(topics: readonly (readonly [string, string])[], name: (suffix: string) => string): string {
  const [first, ...rest] = topics.map(([, column], i) => ({ row: ident(column), given: name(`topic_${i}`) }));
  const all = rest.map((t) => `(${t.given} IS NULL OR ${t.row} = ${t.given})`).join(' AND ');
  const any = rest.map((t) => `(${t.given} IS NOT NULL AND ${t.row} = ${t.given})`).join(' OR ');
  const others = rest.length === 0 ? 'true' : `CASE WHEN ${name('topics_any')} THEN (${any}) ELSE (${all}) END`;
  return `(${first!.given} IS NULL OR ${first!.row} = ${first!.given}) AND (NOT ${name('topics_combined')} OR ${others})`;
}

const ident = (name: string): string => `"${name.replaceAll('"', '""')}"`;
const literal = (value: string): string => `'${value.replaceAll("'", "''")}'`;
