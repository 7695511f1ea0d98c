import type { DatasetDef, EndpointDef } from './dataset.js';

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

/** The window's block range as a condition: on the block column, or between its blocks' times. */
function rangeCondition(def: DatasetDef, w: ScopeRange): string {
  if (def.blockColumn !== undefined) return `${ident(def.blockColumn)} BETWEEN ${w.range.from} AND ${w.range.to}`;
  const at = (t: string): string => `CAST(${literal(t)} AS TIMESTAMPTZ)`;
  return `${ident(def.blockTimeColumn!)} BETWEEN ${at(w.times!.from)} AND ${at(w.times!.to)}`;
}

/**
 * The topic filter of a window of an endpoint declaring scopeTopics, as the API applies it (explorer #18): topic 0
 * equal when given; with `type` combine (the default when another topic is given) the other given topics combined
 * by `operand`. Undefined when the scope names no topic (all the contract's logs).
 */
function topicsCondition(endpoint: EndpointDef, scope: Record<string, string>): string | undefined {
  const topics = endpoint.scopeTopics;
  if (!topics) return undefined;
  const given = topics.map(([key, column]) => (scope[key] ? `${ident(column)} = ${literal(scope[key].toLowerCase())}` : undefined));
  const [first, ...rest] = given;
  const others = rest.filter((c): c is string => c !== undefined);
  const combine = (scope.type ?? (others.length > 0 ? 'combine' : 'single')) === 'combine';
  const parts = first ? [first] : [];
  if (combine && others.length > 0) parts.push(`(${others.join(scope.operand === 'or' ? ' OR ' : ' AND ')})`);
  return parts.length > 0 ? parts.join(' AND ') : undefined;
}

const ident = (name: string): string => `"${name.replaceAll('"', '""')}"`;
const literal = (value: string): string => `'${value.replaceAll("'", "''")}'`;

/**
 * A SQL condition on rows of `def` (columns by name), true for a row that one of `windows` listed: inside the
 * window's block range, its scope's values in the declared columns, and, where the dataset records which endpoint
 * gave a row (a column of source `$meta.endpoint`), given by the window's endpoint. Windows of one endpoint, range
 * and single scope key share one IN list, so a batch of many addresses stays one short condition. Undefined when no
 * window is replaceable. The condition may be NULL for a row (NULL columns): callers coalesce it.
 */
export function scopeRowsCondition(def: DatasetDef, windows: readonly ScopeRange[]): string | undefined {
  const lowerCase = new Set(def.columns.filter((c) => c.kind === 'address' || c.kind === 'hash').map((c) => c.name));
  const endpointColumn = def.columns.find((c) => c.source === '$meta.endpoint')?.name;
  const groups = new Map<string, { w: ScopeRange; values: Map<string, Set<string>>[]; topics: string | undefined }>();
  for (const w of windows) {
    if (!rangeKnown(def, w)) continue;
    const keys = Object.keys(w.endpoint.scopeColumns!).sort();
    for (const k of keys) if (w.scope[k] === undefined) throw new Error(`${def.name}: a window of ${w.endpoint.id} has no scope value ${k}`);
    // One scope key: windows differing in its value only share a group (an IN list); several keys: a group each.
    // Windows of other topics never share one: the topics are part of the scope's rows.
    const single = keys.length === 1;
    const topics = topicsCondition(w.endpoint, w.scope);
    const id = [w.endpoint.id, w.range.from, w.range.to, single ? keys[0] : JSON.stringify(keys.map((k) => w.scope[k])), topics ?? ''].join('\u0000');
    const g = groups.get(id) ?? { w, values: [], topics };
    if (single) {
      const m = g.values[0] ?? new Map<string, Set<string>>();
      m.set(keys[0]!, (m.get(keys[0]!) ?? new Set()).add(w.scope[keys[0]!]!));
      g.values[0] = m;
    } else {
      g.values.push(new Map(keys.map((k) => [k, new Set([w.scope[k]!])])));
    }
    groups.set(id, g);
  }
  if (groups.size === 0) return undefined;
  // Windows listing the same scopes over other ranges share one term: their ranges OR'd, the scopes written once.
  const terms = new Map<string, { ranges: string[]; rest: string[] }>();
  for (const { w, values, topics } of groups.values()) {
    const scopes = values.map((m) =>
      [...m]
        .map(([key, vals]) => {
          const cols = w.endpoint.scopeColumns![key]!;
          return `(${cols
            .map((c) =>
              anyOf(
                c,
                [...vals].map((v) => literal(lowerCase.has(c) ? v.toLowerCase() : v)),
              ),
            )
            .join(' OR ')})`;
        })
        .join(' AND '),
    );
    const rest = [`(${scopes.join(' OR ')})`];
    if (topics) rest.push(`(${topics})`);
    if (endpointColumn) rest.push(`${ident(endpointColumn)} = ${literal(w.endpoint.id)}`);
    const id = rest.join('\u0000');
    const t = terms.get(id) ?? { ranges: [], rest };
    t.ranges.push(rangeCondition(def, w));
    terms.set(id, t);
  }
  return [...terms.values()]
    .map(({ ranges, rest }) => `(${[ranges.length === 1 ? ranges[0]! : `(${ranges.join(' OR ')})`, ...rest].join(' AND ')})`)
    .join(' OR ');
}

/**
 * Up to this many values are written as equalities, more as an IN list. DuckDB plans an IN list of constants in a
 * condition like this one as a join with a hash table of its own, each taking a fixed share of the engine's
 * memory: a commit replacing a few dozen windows ran the engine out of memory on a few thousand rows.
 */
const EQUALITIES_UP_TO = 16;

/** `column` equal to one of `values` (SQL literals). */
function anyOf(column: string, values: readonly string[]): string {
  if (values.length > EQUALITIES_UP_TO) return `${ident(column)} IN (${values.join(', ')})`;
  const eq = values.map((v) => `${ident(column)} = ${v}`);
  return eq.length === 1 ? eq[0]! : `(${eq.join(' OR ')})`;
}
