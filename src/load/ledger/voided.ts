/**
 * A voided ledger claim and what is said of it (load/ledger/planning.ts decides). Its own module, importing
 * nothing: the run report and the CLI's commands print it, and a command refused before any work must not load
 * DuckDB through the ledger's SQL (test/cli/command-registry.test.ts).
 */

/** A dataset whose ledger claims are void: its table is not in the lake, nor in the lake's history. */
export interface VoidedClaim {
  dataset: string;
  /** This network's scopes that had a watermark. */
  scopes: number;
  /** The highest of their watermarks (null: none on this network, only another's or a resumed run's windows). */
  block: number | null;
  /** Windows of the resumed run (and the runs it resumed) that the lake does not hold after all. */
  windows: number;
}

/** What a log, a report, a plan and an enqueue say of a voided claim. */
export function voidedText(v: VoidedClaim, network: string): string {
  const claims = [
    v.block === null ? '' : `blocks up to ${v.block} of ${v.scopes} scope${v.scopes === 1 ? '' : 's'} on ${network}`,
    v.windows ? `${v.windows} windows of the run resumed` : '',
  ].filter(Boolean);
  return `the ledger counts ${claims.length ? claims.join(' and ') : 'rows'} of ${v.dataset} as loaded, but the lake has no table ${v.dataset} nor any record of one (another DuckLake writer dropped it and expired its snapshots): those claims are void, and ${v.dataset}'s whole range is fetched again`;
}
