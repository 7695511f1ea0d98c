import type { DatasetDef, EndpointDef } from './dataset.js';

/** A window's listing as the lake holds it: the endpoint, the scope and the block range it was asked for. */
export interface ScopeRange {
  endpoint: EndpointDef;
  scope: Record<string, string>;
  range: { from: number; to: number };
}

/**
 * Whether the lake can tell the rows a window of `endpoint` listed: the dataset's rows carry a block number and
 * the endpoint declares the columns its scope filters on (EndpointDef.scopeColumns). event_logs' rows carry no
 * block number, so its windows cannot be replaced.
 */
export function replaceable(def: DatasetDef, endpoint: EndpointDef): boolean {
  return def.blockColumn !== undefined && endpoint.blockRange !== undefined && endpoint.scopeColumns !== undefined;
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
  const block = def.blockColumn;
  if (block === undefined) return undefined;
  const lowerCase = new Set(def.columns.filter((c) => c.kind === 'address' || c.kind === 'hash').map((c) => c.name));
  const endpointColumn = def.columns.find((c) => c.source === '$meta.endpoint')?.name;
  const groups = new Map<string, { w: ScopeRange; values: Map<string, Set<string>>[] }>();
  for (const w of windows) {
    if (!replaceable(def, w.endpoint)) continue;
    const keys = Object.keys(w.endpoint.scopeColumns!).sort();
    for (const k of keys) if (w.scope[k] === undefined) throw new Error(`${def.name}: a window of ${w.endpoint.id} has no scope value ${k}`);
    // One scope key: windows differing in its value only share a group (an IN list); several keys: a group each.
    const single = keys.length === 1;
    const id = [w.endpoint.id, w.range.from, w.range.to, single ? keys[0] : JSON.stringify(keys.map((k) => w.scope[k]))].join('\u0000');
    const g = groups.get(id) ?? { w, values: [] };
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
  const terms = [...groups.values()].map(({ w, values }) => {
    const scopes = values.map((m) =>
      [...m]
        .map(([key, vals]) => {
          const cols = w.endpoint.scopeColumns![key]!;
          return `(${cols.map((c) => `${ident(c)} IN (${[...vals].map((v) => literal(lowerCase.has(c) ? v.toLowerCase() : v)).join(', ')})`).join(' OR ')})`;
        })
        .join(' AND '),
    );
    const parts = [`${ident(block)} BETWEEN ${w.range.from} AND ${w.range.to}`, `(${scopes.join(' OR ')})`];
    if (endpointColumn) parts.push(`${ident(endpointColumn)} = ${literal(w.endpoint.id)}`);
    return `(${parts.join(' AND ')})`;
  });
  return terms.join(' OR ');
}
