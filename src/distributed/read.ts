/**
 * Reading a distributed lake: one DuckDB view per table of a snapshot (the newest, or `--as-of` a snapshot id or
 * a time), each over exactly the files that snapshot lists. A snapshot's file list never changes once committed,
 * so a query sees one whole snapshot even while the committer goes on.
 *
 * Beside them, the same tables a local lake's catalog has (see load/catalog.ts), so that a query or `status`
 * reads either kind of lake alike: `runs`, `windows`, `watermarks` and `request_usage` (the one ledger of both
 * modes, load/ledger/schema.ts; copied as `chainlake.runs`, `chainlake.windows`…), lineage's `requests` and
 * verify's `verifications`,
 * the `files` view, the DuckLake's own `ducklake_*` tables, and an empty view of the right columns for every
 * dataset and `_rejects` no snapshot has written yet. These are copies taken when the reader opens.
 */
import { REQUESTS_TABLE, requestsLedgerDdl } from '../load/ledger/requests.js';
import { verificationsDdl, verificationsTable } from '../load/ledger/verifications.js';
import type { DuckDBConnection } from '@duckdb/node-api';
import { DuckDBInstance } from '../ducklake/node-api.js';
import type pg from 'pg';
import { DATASETS } from '../datasets/registry.js';
import { dataPathOf, listTables, planScan, resolveSnapshot, type AsOf } from '../ducklake/reader.js';
import { filesView } from '../load/catalog.js';
import { datasetShape, emptyTypedSelect, REJECTS_SHAPE } from '../load/schema.js';
import { ident, literal } from '../load/sql.js';
import { ledgerDdl, ledgerTable } from '../load/ledger/schema.js';
import { CATALOG_SCHEMA, CONTROL_SCHEMA, openCatalog, QUEUE_SCHEMA, WINDOW_QUEUE } from './control-plane.js';
import { ChainlakeError } from '../errors.js';
import { openStore, storeLocationOf, type StoreConnection } from './store.js';

export interface DistributedLake {
  conn: DuckDBConnection;
  snapshot: number;
  tables: string[];
  close(): void;
}

export { parseAsOf } from '../load/read/reader.js';

/**
 * `datasets: false`: only the ledger, the catalog's tables and `files`, no view of the data (which downloads the
 * snapshot's files from an object store): what `status` reads. A list of table names: views of those tables only
 * (`report` reads `_rejects`, not the datasets).
 */
export async function openDistributedLake(opts: {
  catalog: string;
  store?: string;
  storeConnection?: StoreConnection;
  asOf?: AsOf;
  datasets?: boolean | readonly string[];
}): Promise<DistributedLake> {
  const { client, catalog } = await openCatalog(opts.catalog);
  let store: Awaited<ReturnType<typeof openStore>> | undefined;
  try {
    // The files as this machine reaches them: the store it names, else the one the catalog records.
    store = await openStore(opts.store ?? storeLocationOf(await dataPathOf(catalog)), opts.storeConnection);
    const dataPath = store.localDataPath;
    const snapshot = await resolveSnapshot(catalog, opts.asOf).catch((e: Error) => {
      throw new ChainlakeError(`cannot read the lake at ${describeAsOf(opts.asOf)}: ${e.message}`, { code: 'CHAINLAKE_USAGE' });
    });
    const tables = await listTables(catalog, snapshot.snapshotId);
    const instance = await DuckDBInstance.create(':memory:', { autoinstall_known_extensions: 'false' });
    const conn = await instance.connect();
    await conn.run("SET TimeZone = 'UTC'");
    const wanted = opts.datasets;
    const viewed = wanted === false ? [] : Array.isArray(wanted) ? tables.filter((t) => wanted.includes(t.name)) : tables;
    for (const t of viewed) {
      const scan = await planScan(catalog, t.name, {
        asOf: { snapshot: snapshot.snapshotId },
        schema: t.schema.name,
        dataPath,
        engine: { conn, prefix: '__chainlake_' },
      });
      for (const f of scan.files) {
        await store.localCopy(store.lakeLocation(f.path));
        if (f.deleteFile) await store.localCopy(store.lakeLocation(f.deleteFile.path));
      }
      await conn.run(`CREATE VIEW ${ident(t.name)} AS ${scan.sql}`);
    }
    await copyLedger(client, conn, wanted === false ? undefined : new Set(viewed.map((t) => t.name)));
    const held = store;
    store = undefined;
    return {
      conn,
      snapshot: snapshot.snapshotId,
      tables: tables.map((t) => t.name),
      close() {
        conn.closeSync();
        instance.closeSync();
        void held.close();
      },
    };
  } finally {
    await store?.close();
    await client.end().catch(() => undefined);
  }
}

function describeAsOf(asOf: AsOf): string {
  if (!asOf) return 'its newest snapshot';
  return 'snapshot' in asOf ? `snapshot ${asOf.snapshot}` : `time ${asOf.time.toISOString()}`;
}

/** Rows per INSERT when copying a table: a statement of bounded size, whatever the table's. */
const COPY_BATCH_ROWS = 1000;

/**
 * Copies a PostgreSQL table (`select` may replace its rows' query) into the DuckDB table `target`, which exists:
 * each of `columns` from the source column of that name (`from` when the source has not got it: a control plane
 * not yet migrated, read by a role that may not migrate it), else NULL. Every value travels as PostgreSQL's text
 * and is cast to the target column's type by DuckDB.
 */
async function copyTable(
  client: pg.Client,
  conn: DuckDBConnection,
  source: { schema: string; table: string; select?: string },
  target: string,
  columns: readonly { name: string; from?: string }[],
): Promise<void> {
  const have = new Set(
    (
      await client.query<{ column_name: string }>(`SELECT column_name FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2`, [
        source.schema,
        source.table,
      ])
    ).rows.map((r) => r.column_name),
  );
  const picked = columns.map((c) => (have.has(c.name) ? c.name : c.from && have.has(c.from) ? c.from : undefined));
  const from = source.select ?? `SELECT * FROM ${source.schema}.${source.table}`;
  const rows = (
    await client.query<(string | null)[]>({
      text: `SELECT ${picked.map((p) => (p ? `t.${ident(p)}::text` : 'NULL::text')).join(', ')} FROM (${from}) t`,
      rowMode: 'array',
    })
  ).rows;
  const list = columns.map((c) => ident(c.name)).join(', ');
  for (let i = 0; i < rows.length; i += COPY_BATCH_ROWS) {
    const values = rows.slice(i, i + COPY_BATCH_ROWS).map((r) => `(${r.map((v) => (v === null ? 'NULL' : literal(v))).join(', ')})`);
    await conn.run(`INSERT INTO ${target} (${list}) VALUES ${values.join(', ')}`);
  }
}

/** A PostgreSQL table as it is, into a new DuckDB table of the same columns (the DuckLake's catalog tables; `target`: its name there). */
async function copyAsIs(client: pg.Client, conn: DuckDBConnection, schema: string, table: string, target = ident(table)): Promise<void> {
  const columns = (
    await client.query<{ column_name: string; data_type: string }>(
      `SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position`,
      [schema, table],
    )
  ).rows;
  await conn.run(`CREATE TABLE ${target} (${columns.map((c) => `${ident(c.column_name)} ${DUCK_TYPES[c.data_type] ?? 'VARCHAR'}`).join(', ')})`);
  // Another writer's inlined rows keep VARCHAR columns as bytea (the reference extension): copied as their text.
  const select = columns.some((c) => c.data_type === 'bytea')
    ? `SELECT ${columns
        .map((c) => (c.data_type === 'bytea' ? `convert_from(${ident(c.column_name)}, 'UTF8') AS ${ident(c.column_name)}` : ident(c.column_name)))
        .join(', ')} FROM ${schema}.${ident(table)}`
    : undefined;
  await copyTable(
    client,
    conn,
    { schema, table, select },
    target,
    columns.map((c) => ({ name: c.column_name })),
  );
}

/** PostgreSQL's column types as DuckDB's (what a local catalog's DuckLake tables use); anything else as text. */
const DUCK_TYPES: Record<string, string> = {
  bigint: 'BIGINT',
  integer: 'INTEGER',
  smallint: 'SMALLINT',
  boolean: 'BOOLEAN',
  text: 'VARCHAR',
  'character varying': 'VARCHAR',
  uuid: 'UUID',
  jsonb: 'JSON',
  json: 'JSON',
  date: 'DATE',
  'double precision': 'DOUBLE',
  real: 'FLOAT',
  'timestamp with time zone': 'TIMESTAMPTZ',
  'timestamp without time zone': 'TIMESTAMP',
};

async function relationExists(client: pg.Client, name: string): Promise<boolean> {
  return (await client.query(`SELECT to_regclass($1) IS NOT NULL AS found`, [name])).rows[0]?.found === true;
}

/**
 * The control plane's ledger and the DuckLake's catalog tables, copied into the reader's DuckDB (one consistent
 * view of them: a read-only, repeatable-read transaction), and the local lake's views over them. `written`: the
 * tables the snapshot has (the others get an empty view of their columns).
 */
async function copyLedger(client: pg.Client, conn: DuckDBConnection, written: ReadonlySet<string> | undefined): Promise<void> {
  await inReadOnlySnapshot(client, async () => {
    await copyCatalogTables(client, conn);
    await createControlTables(conn);
    const queue = await windowQueueJoin(client);
    await copyControlTables(client, conn);
    if (queue && (await relationExists(client, `${CONTROL_SCHEMA}.windows`))) await copyQueueErrors(client, conn, queue);
  });
  await createLakeViews(conn, written);
}

/** Runs `copy` in one read-only, repeatable-read transaction of `client`: every table copied from the same state. */
async function inReadOnlySnapshot(client: pg.Client, copy: () => Promise<void>): Promise<void> {
  await client.query(`SET TIME ZONE 'UTC'`);
  await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
  try {
    await copy();
    await client.query('COMMIT');
  } catch (e) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw e;
  }
}

async function copyCatalogTables(client: pg.Client, conn: DuckDBConnection): Promise<void> {
  const catalogTables = (
    await client.query<{ table_name: string }>(
      `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 AND table_name LIKE 'ducklake%' ORDER BY table_name`,
      [CATALOG_SCHEMA],
    )
  ).rows.map((r) => r.table_name);
  for (const t of catalogTables) await copyAsIs(client, conn, CATALOG_SCHEMA, t);
}

async function createControlTables(conn: DuckDBConnection): Promise<void> {
  await conn.run(`CREATE SCHEMA ${CONTROL_SCHEMA}`);
  // The ledger's tables as the one declaration has them (whatever chainlake wrote the control plane).
  for (const statement of ledgerDdl('duckdb', CONTROL_SCHEMA, MIRRORED)) await conn.run(statement);
}

/**
 * A failed window's error is kept by the queue (the worker hands it to pg-boss with the failure): the join of a
 * window to its queue jobs (live and archived), or undefined where the control plane has no queue tables.
 */
async function windowQueueJoin(client: pg.Client): Promise<string | undefined> {
  const found: string[] = [];
  for (const q of [`${QUEUE_SCHEMA}.job`, `${QUEUE_SCHEMA}.archive`]) if (await relationExists(client, q)) found.push(q);
  return found.length
    ? `JOIN (${found.map((q) => `SELECT id, output FROM ${q} WHERE name = ${literal(WINDOW_QUEUE)}`).join(' UNION ALL ')}) j ON j.id = w.job_id`
    : undefined;
}

/** The mirrored ledger tables the control plane has, then lineage's and verify's tables as it has them. */
async function copyControlTables(client: pg.Client, conn: DuckDBConnection): Promise<void> {
  for (const t of MIRRORED) {
    if (!(await relationExists(client, `${CONTROL_SCHEMA}.${t.name}`))) continue;
    const columns = t.columns.map((c) => ({ name: c.name, from: c.renamedFrom }));
    await copyTable(client, conn, { schema: CONTROL_SCHEMA, table: t.name }, `${CONTROL_SCHEMA}.${ident(t.name)}`, columns);
  }
  // Lineage's and verify's tables, as the control plane has them (created empty below when it has not).
  for (const t of [REQUESTS_TABLE, 'verifications']) {
    if (await relationExists(client, `${CONTROL_SCHEMA}.${t}`)) await copyAsIs(client, conn, CONTROL_SCHEMA, t, `${CONTROL_SCHEMA}.${ident(t)}`);
  }
}

/** The queue's error (through `queue`, windowQueueJoin's join) where the window's own row has none. */
async function copyQueueErrors(client: pg.Client, conn: DuckDBConnection, queue: string): Promise<void> {
  const errors = (
    await client.query<[string, string, string]>({
      text: `SELECT w.run_id, w.window_id, j.output->>'error' FROM ${CONTROL_SCHEMA}.windows w ${queue} WHERE w.error IS NULL AND j.output->>'error' IS NOT NULL`,
      rowMode: 'array',
    })
  ).rows;
  for (let i = 0; i < errors.length; i += COPY_BATCH_ROWS) {
    const values = errors.slice(i, i + COPY_BATCH_ROWS).map((r) => `(${r.map((v) => literal(v)).join(', ')})`);
    await conn.run(
      `UPDATE ${CONTROL_SCHEMA}.windows w SET error = e.error FROM (VALUES ${values.join(', ')}) e(run_id, window_id, error) WHERE w.run_id = e.run_id AND w.window_id = e.window_id`,
    );
  }
}

/** The local lake's views over the copied tables; a dataset the snapshot has not written gets an empty typed view. */
async function createLakeViews(conn: DuckDBConnection, written: ReadonlySet<string> | undefined): Promise<void> {
  await conn.run(LEDGER_VIEWS);
  const shapes = [...Object.values(DATASETS).map(datasetShape), REJECTS_SHAPE];
  await conn.run(filesView(shapes));
  for (const shape of written ? shapes : []) {
    if (written?.has(shape.name)) continue;
    const partitions = [
      { name: 'network', type: 'VARCHAR', doc: '' },
      { name: shape.partition, type: 'DATE', doc: '' },
    ];
    await conn.run(`CREATE VIEW ${ident(shape.name)} AS ${emptyTypedSelect(shape, partitions)}`);
  }
}

/** The ledger's tables a reader of a distributed lake gets (those `status` and a local lake's views have). */
const MIRRORED = ['runs', 'windows', 'watermarks', 'declared_tables', 'request_usage'].map(ledgerTable);

/** What the ledger knows of a distributed run, as its `report` (LEDGER_VIEWS). */
const RUN_REPORT = `json_object('runId', r.run_id, 'job', r.job, 'network', r.network, 'jobFile', r.job_file, 'head', r.head,
                     'range', json_object('from', r.range_from, 'to', r.range_to),
                     'outsideWindows', r.outside_windows,
                     'totals', json_object('windows', coalesce(t.windows, 0), 'windowsFailed', coalesce(t.windows_failed, 0), 'rows', coalesce(t.rows, 0),
                                           'rejects', coalesce(t.rejects, 0),
                                           'requests', coalesce(t.requests, 0) + coalesce(CAST(json_extract(r.outside_windows, '$.requests') AS BIGINT), 0)),
                     'quota', CASE WHEN json_extract(r.job_doc, '$.dailyRequestQuota') IS NOT NULL
                                   THEN json_object('limit', CAST(json_extract(r.job_doc, '$.dailyRequestQuota') AS BIGINT)) END)`;

/**
 * `runs`, `windows`, `watermarks` and `declared_tables` as a local lake has them: the ledger's tables, whose columns are the same in
 * both modes. A distributed run has no report: its `report` holds what the ledger knows (network, head, range, and
 * the totals of its windows, its requests with those its enqueue sent outside them, as a local run's report counts
 * its head pin), with what its record holds (`voided`: the claims an enqueue voided, distributed/enqueue.ts).
 * Windows written by an earlier chainlake get their planned range and commit time.
 */
const LEDGER_VIEWS = `
${requestsLedgerDdl(CONTROL_SCHEMA).join(';\n')};
CREATE VIEW ${REQUESTS_TABLE} AS SELECT * FROM ${CONTROL_SCHEMA}.${REQUESTS_TABLE};
${verificationsDdl(CONTROL_SCHEMA)};
CREATE VIEW verifications AS SELECT * FROM ${verificationsTable(CONTROL_SCHEMA)};
CREATE VIEW runs AS
  WITH t AS (
    SELECT run_id, count(*) AS windows, count(*) FILTER (WHERE status = 'failed') AS windows_failed,
           coalesce(sum(rows_got), 0) AS rows, coalesce(sum(rejects), 0) AS rejects, coalesce(sum(requests), 0) AS requests
    FROM ${CONTROL_SCHEMA}.windows GROUP BY run_id)
  SELECT ${ledgerTable('runs')
    .columns.map((c) =>
      c.name === 'report'
        ? `CASE WHEN r.report IS NULL THEN ${RUN_REPORT} WHEN r.job_doc IS NOT NULL THEN json_merge_patch(${RUN_REPORT}, r.report) ELSE r.report END AS report`
        : `r.${ident(c.name)}`,
    )
    .join(', ')}
  FROM ${CONTROL_SCHEMA}.runs r LEFT JOIN t USING (run_id);
CREATE VIEW windows AS
  SELECT * REPLACE (
    coalesce(from_block, TRY_CAST(json_extract_string(spec, '$.range.from') AS BIGINT)) AS from_block,
    coalesce(to_block, TRY_CAST(json_extract_string(spec, '$.range.to') AS BIGINT)) AS to_block,
    coalesce(committed_at, CASE WHEN status IN ('committed', 'provisional') THEN updated_at END) AS committed_at)
  FROM ${CONTROL_SCHEMA}.windows;
CREATE VIEW watermarks AS SELECT * FROM ${CONTROL_SCHEMA}.watermarks;
CREATE VIEW declared_tables AS SELECT * FROM ${CONTROL_SCHEMA}.declared_tables;
CREATE VIEW request_usage AS SELECT * REPLACE (NULLIF(run_id, '') AS run_id) FROM ${CONTROL_SCHEMA}.request_usage;
`;
