/**
 * The run ledger, declared once for both kinds of lake: `runs`, `windows`, `watermarks`, `commits`,
 * `declared_tables` and `request_usage`, in the lake's catalog database (`catalog.duckdb` on one machine, the `chainlake` schema of the
 * PostgreSQL control plane in distributed mode). One column vocabulary for both modes: the union of what each needs,
 * the same name for the same fact; a column one mode does not fill is NULL there. The DDL of both engines, the
 * migration of older catalogs of each, the column documentation and the distributed reader's mirror all derive from
 * this declaration (as src/ducklake/ddl.ts does for DuckLake's own tables).
 *
 * Other modules' tables (lineage's `requests`, verify's `verifications`…) are declared in their own files; the
 * distributed mode's coordination tables (leases, workers, holds) stay in src/distributed/control-plane.ts.
 */
import type { CatalogDb, Dialect } from '../../ducklake/catalog-db.js';
import { ident } from '../../ducklake/ddl.js';
import { bugError } from '../../errors.js';

/** The ledger's column types; the only engine differences are spelled in TYPE_NAMES. */
export type LedgerType = 'text' | 'bigint' | 'integer' | 'date' | 'timestamptz' | 'json' | 'uuid';

/** Each type as CREATE TABLE spells it, and as information_schema.columns.data_type reports it, per engine. */
const TYPE_NAMES: Record<Dialect, Record<LedgerType, { ddl: string; reported: string }>> = {
  duckdb: {
    text: { ddl: 'VARCHAR', reported: 'VARCHAR' },
    bigint: { ddl: 'BIGINT', reported: 'BIGINT' },
    integer: { ddl: 'INTEGER', reported: 'INTEGER' },
    date: { ddl: 'DATE', reported: 'DATE' },
    timestamptz: { ddl: 'TIMESTAMPTZ', reported: 'TIMESTAMP WITH TIME ZONE' },
    json: { ddl: 'JSON', reported: 'JSON' },
    uuid: { ddl: 'UUID', reported: 'UUID' },
  },
  postgres: {
    text: { ddl: 'TEXT', reported: 'text' },
    bigint: { ddl: 'BIGINT', reported: 'bigint' },
    integer: { ddl: 'INTEGER', reported: 'integer' },
    date: { ddl: 'DATE', reported: 'date' },
    timestamptz: { ddl: 'TIMESTAMPTZ', reported: 'timestamp with time zone' },
    json: { ddl: 'JSONB', reported: 'jsonb' },
    uuid: { ddl: 'UUID', reported: 'uuid' },
  },
};

export function sqlType(dialect: Dialect, type: LedgerType): string {
  return TYPE_NAMES[dialect][type].ddl;
}

export interface LedgerColumn {
  readonly name: string;
  readonly type: LedgerType;
  readonly doc: string;
  /** A default both engines spell alike (`NOW()`, a literal). */
  readonly default?: string;
  /** The column's name in control planes written before the one ledger (renamed by the migration). */
  readonly renamedFrom?: string;
}

export interface LedgerTable {
  readonly name: string;
  readonly doc: string;
  readonly columns: readonly LedgerColumn[];
  readonly primaryKey?: readonly string[];
  /** Secondary indexes (both engines): a unique one is what `ON CONFLICT` of an insert relies on. */
  readonly indexes?: readonly { name: string; columns: readonly string[]; unique?: boolean }[];
  /** Indexes older catalogs have and this declaration replaced (dropped by the migration). */
  readonly droppedIndexes?: readonly string[];
}

const c = (name: string, type: LedgerType, doc: string, more: Partial<LedgerColumn> = {}): LedgerColumn => ({ name, type, doc, ...more });

/** The ledger's tables, in creation order. */
export const LEDGER_TABLES: readonly LedgerTable[] = [
  {
    name: 'runs',
    doc: 'One row per chainlake run (and compaction), on one machine or distributed.',
    primaryKey: ['run_id'],
    columns: [
      c('run_id', 'text', 'The run: its UTC start time and a random suffix.'),
      c('job', 'text', "The job's name.", { renamedFrom: 'job_name' }),
      c('network', 'text', 'The network the run exported or decoded (NULL for a compaction or reconciliation).'),
      c('started_at', 'timestamptz', 'When the run started (distributed: when it was enqueued).', { default: 'NOW()', renamedFrom: 'created_at' }),
      c('finished_at', 'timestamptz', 'When the run ended; NULL while it runs.'),
      c(
        'status',
        'text',
        'running (or killed before its last commit was decided), complete, partial (some windows failed), failed, interrupted, abandoned (killed; found dead by a later command), compact.',
        { default: "'running'" },
      ),
      c(
        'report',
        'json',
        'The run report as JSON: datasets, windows, rows, rejects, requests, retries, throttles, files, errors (NULL for a distributed run).',
      ),
      c('job_doc', 'json', 'The job document a distributed run was enqueued with, without its API key (workers read it).'),
      c('job_file', 'text', 'The job file a distributed run was enqueued from.'),
      c('head', 'bigint', 'The chain head the run was planned at (NULL for jobs without block ranges).'),
      c('range_from', 'bigint', "The first block of the run's range."),
      c('range_to', 'bigint', "The last block of the run's range."),
      c('ingested_at', 'text', 'The `_ingested_at` every row of the distributed run carries (ISO 8601 UTC).'),
      c('decode', 'json', "The decoded datasets of a distributed run's `decode` key, resolved at enqueue (the committer decodes with them); NULL without one."),
      c(
        'outside_windows',
        'json',
        "The requests a distributed run's enqueue sent outside its windows (the head lookup, an ABI), as {requests, retries, throttles}: its totals count them, as a local run's report counts its own (`outsideWindows`); NULL on one machine.",
      ),
    ],
  },
  {
    name: 'windows',
    doc: 'One row per window of a run: scope, block range, state, completeness and request accounting.',
    indexes: [
      { name: 'windows_run_window', columns: ['run_id', 'window_id'], unique: true },
      { name: 'windows_status', columns: ['status'] },
    ],
    // A control plane's index of the window state, under its old column name.
    droppedIndexes: ['windows_state'],
    columns: [
      c('run_id', 'text', 'The run the window belongs to.'),
      c('window_id', 'text', 'The window within its run (dataset, network, scope, block range); NULL on rows a local lake wrote before catalog format 4.'),
      c('dataset', 'text', 'The dataset the window fetches.'),
      c('network', 'text', 'mainnet or testnet.'),
      c('scope', 'text', 'The scope of the window, e.g. address=0x…; - for datasets without one.', { renamedFrom: 'scope_key' }),
      c('from_block', 'bigint', 'First block of the range the window covers (as planned until it is fetched).', { renamedFrom: 'covered_from' }),
      c('to_block', 'bigint', 'Last block of the range the window covers (as planned until it is fetched).', { renamedFrom: 'covered_to' }),
      c('rows_expected', 'bigint', 'Rows the API said the window holds (its count).'),
      c('rows_got', 'bigint', 'Rows actually paged and staged.', { renamedFrom: 'rows' }),
      c('rejects', 'bigint', 'Entries of the window that did not convert (in `_rejects`).'),
      c('requests', 'bigint', 'HTTP requests the window sent.'),
      c('retries', 'bigint', 'Requests of the window that were retried.'),
      c('throttles', 'bigint', 'Times the API throttled the window.'),
      c('cap_hits', 'bigint', "Times the explorer's result-window cap forced a split of the block range."),
      c('splits', 'bigint', 'Times the block range was split.'),
      c(
        'status',
        'text',
        'queued (waiting for a worker), fetched (in a fragment, waiting for the committer; on one machine, kept by a run whose commit could not happen, waiting for the next run), committed (its rows are in the lake), provisional (committed, but reaching into the unfinal zone: the next run fetches it again and replaces its rows) or failed (nothing of it was written; it is fetched again).',
        { default: "'queued'", renamedFrom: 'state' },
      ),
      c('error', 'text', 'Why the window failed (its last attempt).'),
      c('attempts', 'integer', "Attempts to fetch the window: 1 in a single machine's run; each worker's try in distributed mode.", { default: '0' }),
      c('worker', 'text', 'The worker that fetched it, or tried last (distributed).'),
      c('job_id', 'uuid', "The window's queue job (distributed)."),
      c(
        'spec',
        'json',
        'What to fetch, as the planner made it (distributed: any worker fetches exactly this window); on one machine, a kept window and its files with their sizes and sha256.',
      ),
      c(
        'request_log',
        'text',
        "A fetched window's calls (JSON text), from its worker (or the run that kept it) to the commit that records them in `requests` (NULL once committed).",
      ),
      c('fragment_path', 'text', 'Where the fetched rows wait for the committer (distributed).'),
      c('reject_path', 'text', 'Where the fetched rejects wait for the committer (distributed).'),
      c('snapshot_id', 'bigint', 'The DuckLake snapshot that committed the window (distributed).'),
      c('fetched_at', 'timestamptz', 'When the window was fetched (distributed).'),
      c('committed_at', 'timestamptz', 'When its rows were committed.'),
      c('updated_at', 'timestamptz', 'When the row last changed.', { default: 'NOW()' }),
    ],
  },
  {
    name: 'watermarks',
    doc: 'Per network, dataset and scope: the highest block whose windows are committed. Incremental runs start below it.',
    primaryKey: ['network', 'dataset', 'scope'],
    columns: [
      c('network', 'text', 'mainnet or testnet.'),
      c('dataset', 'text', 'The dataset.'),
      c('scope', 'text', 'The scope; - for datasets without one.'),
      c('block', 'bigint', 'The highest block committed without a gap below it.'),
      c('run_id', 'text', 'The run whose commit moved the watermark last.'),
      c('updated_at', 'timestamptz', 'When it moved.', { default: 'NOW()' }),
    ],
  },
  {
    name: 'commits',
    doc: 'One row per commit applied to the lake. A run commits in batches; a commit is all-or-nothing for catalog readers.',
    primaryKey: ['commit_id'],
    columns: [
      c('commit_id', 'text', '<run_id>/<batch>: the journal that was applied.'),
      c('run_id', 'text', 'The run that committed.'),
      c('files', 'bigint', 'Data files the commit added.'),
      c('rows', 'bigint', 'Rows in those files.'),
      c('bytes', 'bigint', 'Bytes of those files.'),
      c('committed_at', 'timestamptz', 'When the commit was applied.'),
      c('recovered_by', 'text', 'Set when the writer was killed after deciding this commit and a later command (this one) finished it.'),
    ],
  },
  {
    name: 'declared_tables',
    doc: "The tables beyond the registry's datasets and `_rejects` that commits declared (decoded events, reconciled balances): each one's shape and documentation, which views, compaction and rebuilds read on either kind of lake.",
    primaryKey: ['name'],
    columns: [
      c('name', 'text', 'The table (in schema main of the DuckLake).'),
      c('declaration', 'json', 'Its columns, natural key, sort order and partition column, and the documentation of its view, as chainlake declared it.'),
    ],
  },
  {
    name: 'request_usage',
    doc: "Requests sent per UTC day, account and run: the ledger of the job's dailyRequestQuota (a run reads what the day has spent).",
    primaryKey: ['day', 'account', 'run_id'],
    columns: [
      c('day', 'date', 'The UTC day.'),
      c('account', 'text', "The API account the quota belongs to, without its key: the explorer's base URL, or simulator (distributed: the account's name)."),
      c('run_id', 'text', "The run that sent them; empty for a distributed lake's workers, who share an account's day across runs.", { default: "''" }),
      c('requests', 'bigint', 'HTTP requests sent that day (every attempt; distributed: reserved by workers), as of the last commit.'),
    ],
  },
];

export function ledgerTable(name: string): LedgerTable {
  const t = LEDGER_TABLES.find((x) => x.name === name);
  if (!t) throw bugError(`no ledger table ${name}`);
  return t;
}

/** A ledger table's name in SQL: in `schema` (PostgreSQL's control plane) or the catalog's default schema. */
export const ledgerTableName = (schema: string | undefined, name: string): string => (schema ? `${ident(schema)}.${ident(name)}` : ident(name));

/**
 * A column's default in `dialect`. DuckDB gets literal defaults only: replaying a write-ahead log that alters a table
 * (a COMMENT ON COLUMN) binds its defaults before the catalog is attached, and a function default (`NOW()`) then
 * fails the replay with an internal error, leaving the catalog unreadable after a kill. The local code writes those
 * timestamps itself.
 */
function defaultOf(dialect: Dialect, col: LedgerColumn): string | undefined {
  if (col.default === undefined) return undefined;
  return dialect === 'duckdb' && col.default.includes('(') ? undefined : col.default;
}

function columnDdl(dialect: Dialect, col: LedgerColumn): string {
  const d = defaultOf(dialect, col);
  return `${ident(col.name)} ${sqlType(dialect, col.type)}${d !== undefined ? ` DEFAULT ${d}` : ''}`;
}

/** CREATE TABLE / INDEX IF NOT EXISTS statements of the ledger, for `dialect`, in `schema` when given. */
export function ledgerDdl(dialect: Dialect, schema?: string, tables: readonly LedgerTable[] = LEDGER_TABLES): string[] {
  const out: string[] = [];
  for (const t of tables) {
    const cols = t.columns.map((col) => columnDdl(dialect, col));
    if (t.primaryKey) cols.push(`PRIMARY KEY (${t.primaryKey.map(ident).join(', ')})`);
    out.push(`CREATE TABLE IF NOT EXISTS ${ledgerTableName(schema, t.name)} (${cols.join(', ')})`);
  }
  out.push(...indexDdl(schema, tables));
  return out;
}

function indexDdl(schema: string | undefined, tables: readonly LedgerTable[]): string[] {
  // An index's name is schema-local in both engines: it is created in the table's schema.
  return tables.flatMap((t) =>
    (t.indexes ?? []).map(
      (i) =>
        `CREATE ${i.unique ? 'UNIQUE ' : ''}INDEX IF NOT EXISTS ${ident(i.name)} ON ${ledgerTableName(schema, t.name)} (${i.columns.map(ident).join(', ')})`,
    ),
  );
}

/** The table and column comments (`COMMENT ON`, both engines) of the ledger. */
export function ledgerComments(schema?: string): string[] {
  const literal = (s: string) => `'${s.replace(/'/g, "''")}'`;
  const out: string[] = [];
  for (const t of LEDGER_TABLES) {
    out.push(`COMMENT ON TABLE ${ledgerTableName(schema, t.name)} IS ${literal(t.doc)}`);
    for (const col of t.columns) out.push(`COMMENT ON COLUMN ${ledgerTableName(schema, t.name)}.${ident(col.name)} IS ${literal(col.doc)}`);
  }
  return out;
}

interface FoundColumn {
  table: string;
  column: string;
  type: string;
  nullable: boolean;
}

/**
 * Brings the ledger of an existing catalog to this declaration, then creates what is missing: old column names
 * renamed, missing columns added (with their defaults), types changed (a control plane's `day` TEXT becomes a DATE),
 * NOT NULLs the declaration does not have dropped (a local run has no job document), a PostgreSQL primary key that
 * differs replaced. Idempotent: a current catalog costs one read of information_schema. The caller holds what
 * serialises setup (the catalog file's exclusive lock; the control plane's setup lock) and its transaction.
 */
export async function migrateLedger(db: CatalogDb, schema?: string): Promise<string[]> {
  const where = schema ? `table_schema = '${schema.replace(/'/g, "''")}'` : 'table_schema = current_schema()';
  const names = LEDGER_TABLES.map((t) => `'${t.name}'`).join(', ');
  const found: FoundColumn[] = (
    await db.query(
      `SELECT table_name AS t, column_name AS c, data_type AS d, is_nullable AS n FROM information_schema.columns
       WHERE table_catalog = current_database() AND ${where} AND table_name IN (${names})`,
    )
  ).map((r) => ({ table: String(r.t), column: String(r.c), type: String(r.d), nullable: String(r.n) === 'YES' }));
  const keys = found.length ? await primaryKeys(db, where, names) : new Map<string, { name: string; columns: Set<string> }>();
  const done: string[] = [];
  const run = async (sql: string) => {
    await db.query(sql);
    done.push(sql);
  };
  for (const t of LEDGER_TABLES) {
    const cols = new Map(found.filter((f) => f.table === t.name).map((f) => [f.column, f]));
    if (cols.size === 0) continue; // created below
    const table = ledgerTableName(schema, t.name);
    for (const col of t.columns) {
      let have = cols.get(col.name);
      if (!have && col.renamedFrom && cols.has(col.renamedFrom)) {
        await run(`ALTER TABLE ${table} RENAME COLUMN ${ident(col.renamedFrom)} TO ${ident(col.name)}`);
        have = { ...cols.get(col.renamedFrom)!, column: col.name };
        cols.delete(col.renamedFrom);
        cols.set(col.name, have);
      }
      if (!have) {
        await run(`ALTER TABLE ${table} ADD COLUMN ${columnDdl(db.dialect, col)}`);
        continue;
      }
      const want = TYPE_NAMES[db.dialect][col.type];
      if (have.type.toLowerCase() !== want.reported.toLowerCase()) {
        await run(`ALTER TABLE ${table} ALTER COLUMN ${ident(col.name)} SET DATA TYPE ${want.ddl} USING CAST(${ident(col.name)} AS ${want.ddl})`);
      }
      const keyed = (t.primaryKey ?? []).includes(col.name) || keys.get(t.name)?.columns.has(col.name);
      if (!have.nullable && !keyed) await run(`ALTER TABLE ${table} ALTER COLUMN ${ident(col.name)} DROP NOT NULL`);
    }
    const key = keys.get(t.name);
    // PostgreSQL only: a control plane's `request_usage` was keyed by account and day, without the run. A local
    // catalog's keys never changed (and DuckDB cannot alter a primary key).
    if (db.dialect === 'postgres' && t.primaryKey && !(key?.columns.size === t.primaryKey.length && t.primaryKey.every((k) => key.columns.has(k)))) {
      const drop = key ? `DROP CONSTRAINT ${ident(key.name)}, ` : '';
      await run(`ALTER TABLE ${table} ${drop}ADD PRIMARY KEY (${t.primaryKey.map(ident).join(', ')})`);
    }
    for (const i of t.droppedIndexes ?? []) await db.query(`DROP INDEX IF EXISTS ${ledgerTableName(schema, i)}`);
  }
  for (const sql of ledgerDdl(db.dialect, schema)) await db.query(sql);
  return done;
}

/** The primary key (constraint name and columns) of each ledger table found. */
async function primaryKeys(db: CatalogDb, where: string, names: string): Promise<Map<string, { name: string; columns: Set<string> }>> {
  const rows = await db.query(
    `SELECT tc.table_name AS t, tc.constraint_name AS name, k.column_name AS c FROM information_schema.table_constraints tc
     JOIN information_schema.key_column_usage k ON k.constraint_name = tc.constraint_name AND k.table_schema = tc.table_schema AND k.table_name = tc.table_name
     WHERE tc.constraint_type = 'PRIMARY KEY' AND tc.${where} AND tc.table_catalog = current_database() AND tc.table_name IN (${names})`,
  );
  const out = new Map<string, { name: string; columns: Set<string> }>();
  for (const r of rows) {
    const key = out.get(String(r.t)) ?? out.set(String(r.t), { name: String(r.name), columns: new Set() }).get(String(r.t))!;
    key.columns.add(String(r.c));
  }
  return out;
}
