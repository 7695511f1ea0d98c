/**
 * A dataset as a DuckLake table: the dataset's file columns, then `network` and its partition column (a date),
 * partitioned by both (identity). On a single-machine lake those two are Hive folders; in a DuckLake they are
 * columns of every file, so a file read alone still says where its rows belong.
 */
import type { CatalogDb } from '../../ducklake/catalog-db.js';
import { DuckLakeError } from '../../ducklake/catalog-db.js';
import { currentSnapshot, listColumns, listTables } from '../../ducklake/reader.js';
import { ducklakeTypeTree, type TypeTree } from '../../ducklake/types.js';
import type { LakeColumn, LakeTable } from '../../ducklake/reader.js';
import { ChainlakeError } from '../../errors.js';
import { ident, literal } from '../sql.js';
import { addColumns, createTable, type ColumnSpec } from '../../ducklake/writer.js';
import type { TableShape } from '../schema.js';
import { replacedTables } from '../ledger/recreated.js';

/**
 * The type promotions the spec allows a DuckLake column (docs/stable/duckdb/usage/schema_evolution.md, "Type
 * Promotion"): lossless widenings, each a narrower type to a wider one.
 */
const PROMOTIONS: Readonly<Record<string, readonly string[]>> = {
  int8: ['int16', 'int32', 'int64'],
  int16: ['int32', 'int64'],
  int32: ['int64'],
  uint8: ['uint16', 'uint32', 'uint64'],
  uint16: ['uint32', 'uint64'],
  uint32: ['uint64'],
  float32: ['float64'],
};

/**
 * A column as the catalog has it and as a declaration types it: the same type, nested types included; with `widened`,
 * or a type another writer promoted the declared one to (every value chainlake types fits it, and a data file is
 * written in the catalog's column types: ducklake/data-file.ts dataFileSelect casts to them).
 */
function sameType(have: LakeColumn, want: TypeTree, widened = false): boolean {
  return (
    (have.type === want.type || (widened && (PROMOTIONS[want.type] ?? []).includes(have.type))) &&
    have.children.length === want.children.length &&
    have.children.every((h, i) => sameType(h, want.children[i]!, widened))
  );
}

/** Whether the catalog's column holds a declared column's values as they are or widened (sameType). */
export function holdsDeclared(have: LakeColumn, type: string, where: string): boolean {
  return sameType(have, ducklakeTypeTree(type, where), true);
}

/**
 * Whether a table's columns are already those of `shape` (names, and types or their promotions) and no other: then
 * there is nothing to ensure or check. A column chainlake does not declare (another writer's, or one it renamed)
 * has the table's history read (refuseSchemaChanges).
 */
export function tableMatches(have: readonly LakeColumn[], shape: TableShape): boolean {
  const declared = tableColumns(shape);
  return (
    have.length === declared.length &&
    declared.every((c) => {
      const old = have.find((h) => h.name === c.name);
      return old !== undefined && holdsDeclared(old, c.type, `table ${shape.name}, column ${c.name}`);
    })
  );
}

/** The table's columns: the shape's, then `network` and the partition column. */
export function tableColumns(shape: TableShape): ColumnSpec[] {
  return [...shape.columns.map((c) => ({ name: c.name, type: c.type })), { name: 'network', type: 'VARCHAR' }, { name: shape.partition, type: 'DATE' }];
}

/**
 * Whether the ledger's claims on a table are void (load/ledger/planning.ts voidClaims): then a table another DuckLake
 * writer dropped is created again, empty, for the run that fetches its whole range again; a refusal when they stand
 * (dropped-tables.ts decides, by what the table held). Asked only when the lake lacks the table and its catalog has
 * ended rows of it (`dropped`: the snapshot that ended the newest).
 */
export type ClaimsVoid = boolean | ((table: string, dropped: number) => Promise<boolean | DroppedRefusal>);

/** A dropped table's refusal worded by who knows what it held (dropped-tables.ts: a derived table's, how to derive it again). */
export interface DroppedRefusal {
  message: string;
  hint: string;
}

/**
 * Creates the dataset's table unless the catalog has it, and adds the columns a newer declaration has and the
 * table lacks (an upgrade of chainlake), so that no fetched value is left out of the files. Another DuckLake
 * writer's change to the table or to a column chainlake declares is refused first (refuseSchemaChanges); a table it
 * dropped is created again when `voided` says the ledger's claims on it are void, and with `recreate` (a distributed
 * `catalog rebuild`) whatever happened to it. One committer at a time (the lease).
 */
export async function ensureTable(catalog: CatalogDb, shape: TableShape, opts: { recreate?: boolean; voided?: ClaimsVoid } = {}): Promise<void> {
  const snapshot = await currentSnapshot(catalog);
  const table = (await listTables(catalog, snapshot.snapshotId)).find((t) => t.name === shape.name && t.schema.name === 'main');
  const have = table ? await listColumns(catalog, table.tableId, snapshot.snapshotId) : [];
  // `recreate`: a distributed `catalog rebuild` creates a dropped table again on purpose, and names what it held.
  if (table || !opts.recreate) await refuseSchemaChanges(catalog, shape, table, have, opts.voided);
  if (table) {
    const missing = tableColumns(shape).filter((c) => !have.some((h) => h.name === c.name));
    if (missing.length)
      await addColumns(catalog, { tableName: shape.name, columns: missing, author: 'chainlake', message: `add ${missing.map((c) => c.name).join(', ')}` });
    return;
  }
  try {
    await createTable(catalog, {
      name: shape.name,
      columns: tableColumns(shape),
      partitionBy: ['network', shape.partition],
      author: 'chainlake',
      message: `create ${shape.name}`,
    });
  } catch (error) {
    // A committer that lost its lease between the check and the create: the table is there, which is all we need.
    if (!(error instanceof DuckLakeError && /already exists/.test(error.message))) throw error;
  }
}

/** An ended catalog row of a table or column: when it ended, and the name its id goes by now (none: dropped). */
type Ended = { id: number; name: string; ended: number; now: string | null; type?: string };

/**
 * Refuses, before anything is written, to commit into a table whose columns another DuckLake writer changed in a way
 * chainlake's merge would silently undo or alter (it reads and writes the declared columns by name): a declared
 * table renamed (or dropped while the ledger's claims on it stand), a declared column renamed, dropped, or given
 * another type. `table` and `have` are the
 * table and its columns at the newest snapshot (none: the lake lacks the table). A lake nobody else changed costs
 * no query: the catalog's history is read only when a declared name is missing or a type differs, which is also
 * where a first commit creates a table or a newer declaration adds a column (their names have no history).
 * Columns another writer added are the merge's to keep; they are not chainlake's business here.
 */
export async function refuseSchemaChanges(
  db: CatalogDb,
  shape: TableShape,
  table: LakeTable | undefined,
  have: readonly LakeColumn[],
  voided?: ClaimsVoid,
): Promise<void> {
  if (!table) return refuseEndedTables(db, [shape.name], voided);
  const declared = tableColumns(shape);
  const missing = declared.filter((c) => !have.some((h) => h.name === c.name));
  // A promotion another writer made (ALTER … SET TYPE to a wider type) is followed: chainlake's values fit it.
  const retyped = declared.filter((c) => {
    const old = have.find((h) => h.name === c.name);
    return old !== undefined && !holdsDeclared(old, c.type, `table ${shape.name}, column ${c.name}`);
  });
  // A declared column renamed and another column given its name reads as present by name; its field id says it is
  // another column: the name's first holder (the column chainlake made) is not the column that has it now. Such a
  // rename leaves a column chainlake does not declare, which a lake nobody else changed lacks: only then are the
  // present names' first holders read. (A declared column dropped and then added again, as the refusal of a drop
  // says to, is chainlake's again: its first holder is gone, not renamed.)
  const present = have.some((h) => !declared.some((c) => c.name === h.name)) ? declared.filter((c) => have.some((h) => h.name === c.name)) : [];
  if (missing.length === 0 && retyped.length === 0 && present.length === 0) return;
  const holders = present.length
    ? await firstHolders(
        db,
        table.tableId,
        present.map((c) => c.name),
      )
    : [];
  for (const c of present) {
    const now = have.find((h) => h.name === c.name)!;
    const first = holders.find((h) => h.name === c.name);
    if (!first || first.id === now.columnId || first.now === null) continue;
    throw schemaChanged(
      `column ${c.name} of the lake's table ${shape.name} is not the column chainlake wrote: another DuckLake writer renamed that one to ${first.now} (snapshot ${first.ended}) and gave its name to another column (field id ${now.columnId}, where chainlake's is ${first.id}); chainlake reads and writes its declared columns by name, so its next commit would move ${first.now}'s values into the new column and leave ${first.now} NULL in every partition it rewrites`,
      `give the names back in a DuckDB with the lake attached by the ducklake extension and in use (USE <lake>): ALTER TABLE ${ident(shape.name)} RENAME COLUMN ${ident(c.name)} TO ${ident(`${c.name}_added`)}; ALTER TABLE ${ident(shape.name)} RENAME COLUMN ${ident(first.now)} TO ${ident(c.name)}`,
    );
  }
  if (missing.length === 0 && retyped.length === 0) return;
  const history = await endedColumns(
    db,
    table.tableId,
    [...missing, ...retyped].map((c) => c.name),
  );
  for (const c of missing) {
    const gone = history.find((h) => h.name === c.name && h.now !== c.name);
    // No history: a column a newer declaration adds (ensureTable adds it).
    if (!gone) continue;
    if (gone.now !== null)
      throw schemaChanged(
        `column ${c.name} of the lake's table ${shape.name} was renamed to ${gone.now} by another DuckLake writer (snapshot ${gone.ended}): chainlake reads and writes its declared columns by name, so its next commit would write ${c.name} again and leave ${gone.now} NULL in every partition it rewrites`,
        `rename it back in a DuckDB with the lake attached by the ducklake extension and in use (USE <lake>): ALTER TABLE ${ident(shape.name)} RENAME COLUMN ${ident(gone.now)} TO ${ident(c.name)}`,
      );
    throw schemaChanged(
      `column ${c.name} of the lake's table ${shape.name} was dropped by another DuckLake writer (snapshot ${gone.ended}): chainlake writes it on every row, and adding it again would bring its old values back only in the partitions a commit rewrites`,
      `add it back in a DuckDB with the lake attached by the ducklake extension and in use (USE <lake>): ALTER TABLE ${ident(shape.name)} ADD COLUMN ${ident(c.name)} ${c.type} (rows chainlake fetches carry it again; a partition a commit rewrites reads its old values back from chainlake's files, the others read NULL); or load the dataset into a new lake`,
    );
  }
  // A table another writer created again under the name has no history of chainlake's columns: say so, and how to
  // make it again with the declared types (load/ledger/recreated.ts finds it).
  const again =
    retyped.length && !history.some((h) => retyped.some((c) => h.name === c.name))
      ? (await replacedTables({ db }, '', [shape.name], { covered: true, records: false })).get(shape.name)
      : undefined;
  if (again) {
    const cols = retyped.map((c) => `${c.name} as ${have.find((h) => h.name === c.name)!.type} (chainlake declares ${c.type})`);
    const t = ident(shape.name);
    const made = ident(`${shape.name}_new`);
    throw schemaChanged(
      `the lake's table ${shape.name} was created again by another DuckLake writer (snapshot ${again.recreated}, after the drop at snapshot ${again.dropped}) with ${cols.join(', ')}: chainlake writes every file of it with the declared types, and a DuckLake column only widens`,
      `create it again with the declared types, in a DuckDB with the lake attached by the ducklake extension and in use (USE <lake>): CREATE TABLE ${made} AS SELECT * REPLACE (${retyped.map((c) => `CAST(${ident(c.name)} AS ${c.type}) AS ${ident(c.name)}`).join(', ')}) FROM ${t} WHERE false; ALTER TABLE ${made} SET PARTITIONED BY (${ident('network')}, ${ident(shape.partition)}); INSERT INTO ${made} SELECT * REPLACE (${retyped.map((c) => `TRY_CAST(${ident(c.name)} AS ${c.type}) AS ${ident(c.name)}`).join(', ')}) FROM ${t}; DROP TABLE ${t}; ALTER TABLE ${made} RENAME TO ${t}`,
    );
  }
  for (const c of retyped) {
    const now = have.find((h) => h.name === c.name)!;
    const was = history.find((h) => h.id === now.columnId && h.type !== now.type);
    throw schemaChanged(
      was
        ? `column ${c.name} of the lake's table ${shape.name} was changed from ${was.type} to ${now.type} by another DuckLake writer (snapshot ${was.ended}); chainlake declares it ${c.type} and writes every file with that type`
        : `the lake's table ${shape.name} has column ${c.name} as ${now.type}; this chainlake declares it ${c.type}`,
      was
        ? `a DuckLake column's type cannot be changed back: write this dataset into a new lake (or a new catalog), or load the changed table's rows elsewhere and drop it`
        : 'run the chainlake version that wrote the lake, or export into a new catalog',
    );
  }
}

function schemaChanged(message: string, hint: string): ChainlakeError {
  return new ChainlakeError(message, { code: 'CHAINLAKE_SCHEMA_CHANGED', hint });
}

/**
 * Refuses when a table of `names`, which the lake lacks at its newest snapshot, was there before: another writer
 * renamed it (its rows are in the renamed table, which a new one beside it would lack), or dropped it while the
 * ledger still counts its rows as loaded (`voided` says otherwise when planning voided those claims: the run that
 * fetches its whole range again creates it). chainlake does neither. One query for all of them; none when `names`
 * is empty.
 */
export async function refuseEndedTables(db: CatalogDb, names: readonly string[], voided: ClaimsVoid = false): Promise<void> {
  if (names.length === 0) return;
  const ended = await db.query(
    `SELECT t.table_name, t.end_snapshot, (SELECT n.table_name FROM ducklake_table n WHERE n.table_id = t.table_id AND n.end_snapshot IS NULL) AS now
     FROM ducklake_table t JOIN ducklake_schema s ON s.schema_id = t.schema_id AND s.schema_name = 'main'
     WHERE t.table_name IN (${names.map(literal).join(', ')}) AND t.end_snapshot IS NOT NULL ORDER BY t.end_snapshot DESC`,
  );
  const seen = new Set<string>();
  for (const gone of ended) {
    const [name, at, now] = [String(gone.table_name), Number(gone.end_snapshot), gone.now === null || gone.now === undefined ? null : String(gone.now)];
    // Its newest ended row says what became of it.
    if (seen.has(name)) continue;
    seen.add(name);
    if (now !== null)
      throw schemaChanged(
        `the lake's table ${name} was renamed to ${now} by another DuckLake writer (snapshot ${at}): chainlake writes ${name} by that name, and would start a new table beside it that lacks every row loaded so far`,
        `rename it back in a DuckDB with the lake attached by the ducklake extension and in use (USE <lake>): ALTER TABLE ${ident(now)} RENAME TO ${ident(name)}`,
      );
    const verdict = typeof voided === 'function' ? await voided(name, at) : voided;
    if (verdict === true) continue;
    if (verdict !== false) throw schemaChanged(verdict.message, verdict.hint);
    throw schemaChanged(
      `the lake's table ${name} was dropped by another DuckLake writer (snapshot ${at}) and no run has planned it since: chainlake's ledger still counts its rows as loaded, so a new table would silently lack them`,
      `plan it again: on one machine, run the job again (its planning finds the table dropped, voids the ledger's claims on it and fetches its whole range again); distributed, \`chainlake enqueue\` the job again (its open run taken up: its windows of the table committed before are queued again with the range it lacks, its marks deleted), or \`chainlake catalog rebuild --catalog …\`, which creates it again, empty, and deletes its watermarks, so the next enqueue fetches its whole range again. Its rows stay readable in the snapshots before ${at} until they are expired`,
    );
  }
}

/**
 * For each of `names`, the top-level column of the table that had the name first (its id, the name it has now, none:
 * dropped, and when its row of that name ended, if it did): the column chainlake made under it.
 */
async function firstHolders(db: CatalogDb, tableId: number, names: readonly string[]): Promise<Ended[]> {
  const rows = await db.query(
    `SELECT DISTINCT ON (c.column_name) c.column_id, c.column_name, c.column_type, c.end_snapshot,
            (SELECT n.column_name FROM ducklake_column n WHERE n.table_id = c.table_id AND n.column_id = c.column_id AND n.end_snapshot IS NULL) AS now
     FROM ducklake_column c
     WHERE c.table_id = $1 AND c.parent_column IS NULL AND c.column_name IN (${names.map(literal).join(', ')})
     ORDER BY c.column_name, c.begin_snapshot, c.column_id`,
    [tableId],
  );
  return rows.map((r) => ({
    id: Number(r.column_id),
    name: String(r.column_name),
    type: String(r.column_type),
    ended: r.end_snapshot === null || r.end_snapshot === undefined ? -1 : Number(r.end_snapshot),
    now: r.now === null || r.now === undefined ? null : String(r.now),
  }));
}

/**
 * The ended rows of a table's top-level columns named `names` (their ids are the files' field ids), newest first,
 * with the name and type each column id has now.
 */
async function endedColumns(db: CatalogDb, tableId: number, names: readonly string[]): Promise<Ended[]> {
  const rows = await db.query(
    `SELECT c.column_id, c.column_name, c.column_type, c.end_snapshot,
            (SELECT n.column_name FROM ducklake_column n WHERE n.table_id = c.table_id AND n.column_id = c.column_id AND n.end_snapshot IS NULL) AS now
     FROM ducklake_column c
     WHERE c.table_id = $1 AND c.parent_column IS NULL AND c.end_snapshot IS NOT NULL AND c.column_name IN (${names.map(literal).join(', ')})
     ORDER BY c.end_snapshot DESC`,
    [tableId],
  );
  return rows.map((r) => ({
    id: Number(r.column_id),
    name: String(r.column_name),
    type: String(r.column_type),
    ended: Number(r.end_snapshot),
    now: r.now === null || r.now === undefined ? null : String(r.now),
  }));
}
