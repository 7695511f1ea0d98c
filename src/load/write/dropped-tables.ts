/**
 * What a commit does with a table another DuckLake writer dropped, by what the table held (lake-tables.ts
 * refuseEndedTables asks): the one rule for both kinds of lake, beside planning's (load/ledger/planning.ts
 * voidClaims), which voids the claims on a dropped dataset table before a run fetches.
 *
 * - A dataset's table is created again only while the ledger has no mark of it (planning voided them, or nothing
 *   of it was committed): otherwise it was dropped after the run was planned, and the commit refuses.
 * - `_rejects` is created again, empty: it is a record of what did not convert, not data the lake claims to hold
 *   (its windows' rows are in their datasets), and another writer may clear it. Planning says so when it sees it
 *   (ledger.voided); its old rows stay readable in the snapshots before the drop.
 * - A derived table (decoded events, reconciled balances: `declared_tables`) holds rows derived from the lake's
 *   other tables. A commit that decodes only its own logs would create it again holding those alone, silently
 *   lacking every row decoded before: refused, saying how to derive it whole again. A decoding of every log the
 *   lake holds (`chainlake decode`, either mode: `decoding`) creates it again and fills it.
 */
import { lakeShapes, REJECTS_SHAPE } from '../schema.js';
import { unclaimed } from '../ledger/watermarks.js';
import type { Ledger } from '../ledger/windows.js';
import type { ClaimsVoid } from './lake-tables.js';

export function droppedTables(ledger: Ledger, opts: { decoding?: boolean } = {}): ClaimsVoid {
  return async (table, dropped) => {
    if (table === REJECTS_SHAPE.name) return true;
    if (lakeShapes().some((s) => s.name === table)) return unclaimed(ledger, table);
    if (opts.decoding) return true;
    return {
      message: `the lake's table ${table}, derived from the lake's other tables, was dropped by another DuckLake writer (snapshot ${dropped}): a commit would create it again holding only the rows it derives now, without every row derived before`,
      hint: `derive it again whole: a decoded table with \`chainlake decode <job>\` (distributed: \`chainlake decode --catalog …\`), which creates it again from every log the lake holds; a reconciled one with \`chainlake reconcile\`. Then commit again (a run fetches its windows again; a worker commits the windows it left fetched). Its rows stay readable in the snapshots before ${dropped} until they are expired`,
    };
  };
}
