/**
 * A voided ledger claim and what is said of it (load/ledger/planning.ts decides). Its own module, importing
 * nothing: the run report and the CLI's commands print it, and a command refused before any work must not load
 * DuckDB through the ledger's SQL (test/cli/command-registry.test.ts).
 */

/** A dataset whose ledger claims are void: another DuckLake writer dropped its table (and maybe expired its snapshots). */
export interface VoidedClaim {
  dataset: string;
  /** This network's scopes that had a watermark. */
  scopes: number;
  /** The highest of their watermarks (null: none on this network, only another's or a resumed run's windows). */
  block: number | null;
  /** Windows of the resumed run (and the runs it resumed) that the lake does not hold after all. */
  windows: number;
  /** The snapshot that dropped the table, while the catalog still has its rows (none: expired, no record left). */
  dropped?: number;
  /** The last snapshot kept that has the dropped table: its rows read there (`AT (VERSION => readable)`). */
  readable?: number;
  /**
   * The snapshot where another writer created a table of the name again after the drop (recreated.ts): the claims
   * were on the dropped one; the range fetched again is merged into the new one as it is.
   */
  recreated?: number;
}

/** What a log, a report, a plan and an enqueue say of a voided claim. */
export function voidedText(v: VoidedClaim, network: string): string {
  if (v.dataset === '_rejects')
    return `another DuckLake writer dropped the lake's table _rejects (snapshot ${v.dropped ?? '?'}): chainlake creates it again, empty, and records the rejects of its runs from now on; those recorded before are not recorded again (their windows are committed)${
      v.readable === undefined
        ? ''
        : `, and stay readable in the snapshots before the drop until they are expired (SELECT * FROM _rejects AT (VERSION => ${v.readable}))`
    }`;
  const claims = [
    v.block === null ? '' : `blocks up to ${v.block} of ${v.scopes} scope${v.scopes === 1 ? '' : 's'} on ${network}`,
    v.windows ? `${v.windows} windows of the run resumed` : '',
  ].filter(Boolean);
  const counted = `the ledger counts ${claims.length ? claims.join(' and ') : 'rows'} of ${v.dataset} as loaded`;
  const refetched = `those claims are void, and ${v.dataset}'s whole range is fetched again`;
  if (v.dropped === undefined)
    return `${counted}, but the lake has no table ${v.dataset} nor any record of one (another DuckLake writer dropped it and expired its snapshots): ${refetched}`;
  const readable =
    v.readable === undefined
      ? 'no snapshot before the drop is kept'
      : `the dropped table's rows stay readable in the snapshots before the drop until they are expired (SELECT * FROM ${v.dataset} AT (VERSION => ${v.readable}))`;
  if (v.recreated !== undefined)
    return `${counted}, but another DuckLake writer dropped the lake's table ${v.dataset} (snapshot ${v.dropped}) and created another of that name (snapshot ${v.recreated}): ${refetched} and merged into that table as it is now; ${readable}`;
  return `${counted}, but another DuckLake writer dropped the lake's table ${v.dataset} (snapshot ${v.dropped}): ${refetched} into a new table; ${readable}`;
}
