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
import { lakeShapes, REJECTS_SHAPE, type TableShape } from '../schema.js';
import { unclaimed } from '../ledger/watermarks.js';
import type { Ledger } from '../ledger/windows.js';
import { replacedTables, type Replaced } from '../ledger/recreated.js';
import { ChainlakeError } from '../../errors.js';
import { ident } from '../sql.js';
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

/**
 * Refuses, before anything is written, to commit into a dataset's table another DuckLake writer dropped and created
 * again under its name (load/ledger/recreated.ts) while the ledger's claims on the dropped one stand: the run was
 * planned before it (its marks still there, or its own committed windows, which went with the dropped table), and
 * its commit would leave the new table without every row those claims count, as a table dropped after the run was
 * planned is refused (lake-tables.ts refuseEndedTables). Planning voids them (the next run, or `enqueue`), after
 * which the new table is written as chainlake's. Such a table, voided or not, is refused too when chainlake cannot
 * merge into it: not partitioned by the dataset's partition columns (a `CREATE TABLE … AS SELECT` has none), or
 * holding files written without them (their rows would be invisible to the merge, and kept beside it, twice).
 * One query for all `shapes`, which returns nothing on a lake where no table of their names was dropped.
 */
export function refuseReplaced(ledger: Ledger): (shapes: readonly TableShape[]) => Promise<void> {
  return async (shapes) => {
    const datasets = shapes.filter((s) => lakeShapes().some((d) => d.name === s.name));
    const replaced = await replacedTables(
      ledger,
      '',
      datasets.map((s) => s.name),
      { covered: true },
    );
    for (const [name, r] of replaced) {
      const shape = datasets.find((s) => s.name === name)!;
      await refuseUnpartitioned(ledger, shape, r);
      if (r.covered || (await unclaimed(ledger, name))) continue;
      throw new ChainlakeError(
        `the lake's table ${name} was dropped by another DuckLake writer (snapshot ${r.dropped}) and another created under its name (snapshot ${r.recreated}) after this run was planned: chainlake's ledger still counts the dropped table's rows as loaded, so committing into the new one would leave it silently lacking them`,
        {
          code: 'CHAINLAKE_SCHEMA_CHANGED',
          hint: `plan it again: on one machine, run the job again (its planning finds the table created again, voids the ledger's claims on the dropped one and fetches its whole range again into the new one); distributed, \`chainlake enqueue\` the job again (its open run taken up: its windows of the table committed before are queued again with the range it lacks, its marks deleted). The dropped table's rows stay readable in the snapshots before ${r.dropped} until they are expired${r.readable === undefined ? '' : ` (SELECT * FROM ${ident(name)} AT (VERSION => ${r.readable}))`}`,
        },
      );
    }
  };
}

/** Refuses a table another writer made under a dataset's name that chainlake's merge cannot write (see refuseReplaced). */
async function refuseUnpartitioned(ledger: Ledger, shape: TableShape, r: Replaced): Promise<void> {
  const want = ['network', shape.partition];
  const keys = (
    await ledger.db.query(
      `SELECT c.column_name, k.transform FROM ducklake_partition_info i
       JOIN ducklake_partition_column k ON k.partition_id = i.partition_id AND k.table_id = i.table_id
       JOIN ducklake_column c ON c.table_id = k.table_id AND c.column_id = k.column_id AND c.end_snapshot IS NULL
       WHERE i.table_id = $1 AND i.end_snapshot IS NULL ORDER BY k.partition_key_index`,
      [r.tableId],
    )
  ).map((k) => `${String(k.column_name)}${k.transform === 'identity' || k.transform === null ? '' : ` (${String(k.transform)})`}`);
  const files = Number(
    (
      await ledger.db.query(
        `SELECT count(*) AS n FROM ducklake_data_file d WHERE d.table_id = $1 AND d.end_snapshot IS NULL
           AND NOT EXISTS (SELECT 1 FROM ducklake_file_partition_value v WHERE v.data_file_id = d.data_file_id AND v.partition_key_index = 1)`,
        [r.tableId],
      )
    )[0]?.n ?? 0,
  );
  if (keys.join(',') === want.join(',') && files === 0) return;
  const t = ident(shape.name);
  const partitioned = `CREATE TABLE ${ident(`${shape.name}_new`)} AS SELECT * FROM ${t} WHERE false; ALTER TABLE ${ident(`${shape.name}_new`)} SET PARTITIONED BY (${want.map(ident).join(', ')}); INSERT INTO ${ident(`${shape.name}_new`)} SELECT * FROM ${t}; DROP TABLE ${t}; ALTER TABLE ${ident(`${shape.name}_new`)} RENAME TO ${t}`;
  throw new ChainlakeError(
    `the lake's table ${shape.name} was created again by another DuckLake writer (snapshot ${r.recreated}, after the drop at snapshot ${r.dropped}) ${
      keys.join(',') === want.join(',')
        ? `holding ${files} data files written before it was partitioned`
        : `partitioned ${keys.length ? `by (${keys.join(', ')})` : 'by nothing'}`
    }: chainlake merges its rows partition by partition, by (${want.join(', ')}), and would not see the rows of files without those partition values (they would be kept beside its merge, twice)`,
    {
      code: 'CHAINLAKE_SCHEMA_CHANGED',
      hint: `make it a table partitioned as chainlake's, in a DuckDB with the lake attached by the ducklake extension and in use (USE <lake>): ${partitioned}`,
    },
  );
}
