/**
 * Which lake rows an endpoint's scope lists: what `verify` counts in the lake for a window, to compare with the
 * `count` the API gives for the same scope and block range. The rule is the endpoint's declaration that finality
 * replaces by (EndpointDef.scopeColumns, datasets/scope-rows.ts), so a window verify counts is exactly the rows a
 * window fetched again would replace. Only address scopes are counted; elsewhere verify says it cannot compare.
 */
import type { DatasetDef } from '../../datasets/dataset.js';
import { replaceable } from '../../datasets/scope-rows.js';

/** An address-scoped listing: its rows are those where the scope's address is in one of these columns. */
export interface AddressScope {
  /** Lower-case address columns; a row belongs to the scope when the address is in any of them. */
  columns: readonly string[];
  /** The block number column. */
  blockColumn: string;
  /** Where the dataset records which endpoint gave a row (a `$meta.endpoint` column): only this endpoint's rows. */
  endpoint?: { column: string; id: string };
}

/** The rule for a dataset's endpoint, if its declaration gives one. */
export function addressScopeOf(def: DatasetDef, endpointId: string): AddressScope | undefined {
  const ep = def.endpoints.find((e) => e.id === endpointId);
  if (!ep || !replaceable(def, ep)) return undefined;
  const columns = ep.scopeColumns!.address;
  if (!columns || Object.keys(ep.scopeColumns!).length !== 1) return undefined;
  const endpointColumn = def.columns.find((c) => c.source === '$meta.endpoint')?.name;
  return { columns, blockColumn: def.blockColumn!, ...(endpointColumn ? { endpoint: { column: endpointColumn, id: ep.id } } : {}) };
}
