/**
 * Reading a distributed lake: one DuckDB view per table of a snapshot (the newest, or `--as-of` a snapshot id or
 * a time), each over exactly the files that snapshot lists. A snapshot's file list never changes once committed,
 * so a query sees one whole snapshot even while the committer goes on.
 *
 * Beside them, the same tables a local lake's catalog has (see load/catalog.ts), so that a query or `status`
 * reads either kind of lake alike: `runs`, `windows`, `watermarks` and `request_usage` (views of the control
 * plane's ledger in the local lake's columns; the ledger itself as `chainlake.runs`, `chainlake.windows`…),
 * the `files` view, the DuckLake's own `ducklake_*` tables, and an empty view of the right columns for every
 * dataset and `_rejects` no snapshot has written yet. These are copies taken when the reader opens.
 */
import { REQUESTS_TABLE, requestsLedgerDdl } from '../load/ledger-requests.js';
import { verificationsDdl, verificationsTable } from '../load/ledger-verifications.js';
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import type pg from 'pg';
import { DATASETS } from '../datasets/registry.js';
import { dataPathOf, listTables, planScan, resolveSnapshot, type AsOf } from '../ducklake/reader.js';
import { filesView } from '../load/catalog.js';
import { datasetShape, emptyTypedSelect, REJECTS_SHAPE } from '../load/schema.js';
import { ident, literal } from '../load/sql.js';
import { CATALOG_SCHEMA, CONTROL_SCHEMA, openCatalog, QUEUE_SCHEMA, WINDOW_QUEUE } from './control-plane.js';
import { ChainlakeError } from '../errors.js';
import { openStore, storeLocationOf } from './store.js';

export interface DistributedLake {
  conn: DuckDBConnection;
  snapshot: number;
  tables: string[];
  close(): void;
}

export { parseAsOf } from '../load/reader.js';

/**
 * `datasets: false`: only the ledger, the catalog's tables and `files`, no view of the data (which downloads the
 * snapshot's files from an object store): what `status` reads. A list of table names: views of those tables only
 * (`report` reads `_rejects`, not the datasets).
 */
export async function openDistributedLake(opts: {
  catalog: string;
  store?: string;
  asOf?: AsOf;
  datasets?: boolean | readonly string[];
}): Promise<DistributedLake> {
  const { client, catalog } = await openCatalog(opts.catalog);
  let store: Awaited<ReturnType<typeof openStore>> | undefined;
  try {
    // The files as this machine reaches them: the store it names, else the one the catalog records.
    store = await openStore(opts.store ?? storeLocationOf(await dataPathOf(catalog)));
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
      const scan = await planScan(catalog, t.name, { asOf: { snapshot: snapshot.snapshotId }, schema: t.schema.name, dataPath });
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

/** Rows per INSERT when copying a table: a statement of bounded size, whatever the table's. */
const COPY_BATCH_ROWS = 1000;

/**
 * Copies a PostgreSQL table (`select` may replace its rows' query, same columns) into a DuckDB table `target`
 * with the same columns: every value travels as PostgreSQL's text and is cast to the column's type by DuckDB.
 */
async function copyTable(client: pg.Client, conn: DuckDBConnection, schema: string, table: string, target: string, select?: string): Promise<void> {
  const columns = (
    await client.query<{ column_name: string; data_type: string }>(
      `SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position`,
      [schema, table],
    )
  ).rows;
  await conn.run(`CREATE TABLE ${target} (${columns.map((c) => `${ident(c.column_name)} ${DUCK_TYPES[c.data_type] ?? 'VARCHAR'}`).join(', ')})`);
  const from = select ?? `SELECT * FROM ${schema}.${table}`;
  const rows = (
    await client.query<string[]>({
      text: `SELECT ${columns.map((c) => `t.${ident(c.column_name)}::text`).join(', ')} FROM (${from}) t`,
      rowMode: 'array',
    })
  ).rows;
  for (let i = 0; i < rows.length; i += COPY_BATCH_ROWS) {
    const values = rows.slice(i, i + COPY_BATCH_ROWS).map((r) => `(${r.map((v) => (v === null ? 'NULL' : literal(v))).join(', ')})`);
    await conn.run(`INSERT INTO ${target} VALUES ${values.join(', ')}`);
  }
}

async function relationExists(client: pg.Client, name: string): Promise<boolean> {
  return (await client.query(`SELECT to_regclass($1) IS NOT NULL AS found`, [name])).rows[0]?.found === true;
}

/**
 * The control plane's ledger and the DuckLake's catalog tables, copied into the reader's DuckDB (one consistent
 * view of them: a read-only, repeatable-read transaction), and the local lake's views over them. `written`: the
 * tables the snapshot has (the others get an empty view of their columns).
 */
async function copyLedger(client: pg.Client, conn: DuckDBConnection, written: ReadonlySet<string> | undefined): Promise<void> {
  await client.query(`SET TIME ZONE 'UTC'`);
  await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
  try {
    const catalogTables = (
      await client.query<{ table_name: string }>(
        `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 AND table_name LIKE 'ducklake%' ORDER BY table_name`,
        [CATALOG_SCHEMA],
      )
    ).rows.map((r) => r.table_name);
    for (const t of catalogTables) await copyTable(client, conn, CATALOG_SCHEMA, t, ident(t));
    await conn.run(`CREATE SCHEMA ${CONTROL_SCHEMA}`);
    // A failed window's error is kept by the queue (the worker hands it to pg-boss with the failure).
    const found: string[] = [];
    for (const q of [`${QUEUE_SCHEMA}.job`, `${QUEUE_SCHEMA}.archive`]) if (await relationExists(client, q)) found.push(q);
    const queue = found.length
      ? `JOIN (${found.map((q) => `SELECT id, output FROM ${q} WHERE name = ${literal(WINDOW_QUEUE)}`).join(' UNION ALL ')}) j ON j.id = w.job_id`
      : undefined;
    for (const t of ['runs', 'windows', 'watermarks', 'request_usage', REQUESTS_TABLE, 'verifications']) {
      if (await relationExists(client, `${CONTROL_SCHEMA}.${t}`)) await copyTable(client, conn, CONTROL_SCHEMA, t, `${CONTROL_SCHEMA}.${ident(t)}`);
    }
    if (queue && (await relationExists(client, `${CONTROL_SCHEMA}.windows`))) {
      // The queue's error where the window's own row has none.
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
    await client.query('COMMIT');
  } catch (e) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw e;
  }
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

/**
 * The control plane's ledger in the columns of a local lake's tables (load/catalog.ts TABLES), so that `status`
 * and queries read both kinds alike. A distributed run has no report: its `report` holds what the ledger knows
 * (network, head, range, and the totals of its windows). Columns the ledger does not keep (rows expected,
 * retries, the run that moved a watermark) are NULL.
 */
const LEDGER_VIEWS = `
CREATE TABLE IF NOT EXISTS ${CONTROL_SCHEMA}.runs (run_id VARCHAR, job_name VARCHAR, network VARCHAR, job_doc JSON, job_file VARCHAR, head BIGINT,
  range_from BIGINT, range_to BIGINT, ingested_at VARCHAR, created_at TIMESTAMPTZ, finished_at TIMESTAMPTZ, status VARCHAR);
CREATE TABLE IF NOT EXISTS ${CONTROL_SCHEMA}.windows (run_id VARCHAR, window_id VARCHAR, dataset VARCHAR, network VARCHAR, scope_key VARCHAR, spec JSON,
  job_id UUID, state VARCHAR, covered_from BIGINT, covered_to BIGINT, fragment_path VARCHAR, reject_path VARCHAR, rows BIGINT, rejects BIGINT,
  requests BIGINT, attempts INTEGER, error VARCHAR, worker VARCHAR, snapshot_id BIGINT, fetched_at TIMESTAMPTZ, updated_at TIMESTAMPTZ);
CREATE TABLE IF NOT EXISTS ${CONTROL_SCHEMA}.watermarks (dataset VARCHAR, network VARCHAR, scope VARCHAR, block BIGINT, updated_at TIMESTAMPTZ);
CREATE TABLE IF NOT EXISTS ${CONTROL_SCHEMA}.request_usage (account VARCHAR, day VARCHAR, requests BIGINT);
${requestsLedgerDdl(CONTROL_SCHEMA).join(';\n')};
CREATE VIEW ${REQUESTS_TABLE} AS SELECT * FROM ${CONTROL_SCHEMA}.${REQUESTS_TABLE};
${verificationsDdl(CONTROL_SCHEMA)};
CREATE VIEW verifications AS SELECT * FROM ${verificationsTable(CONTROL_SCHEMA)};
CREATE VIEW runs AS
  WITH t AS (
    SELECT run_id, count(*) AS windows, count(*) FILTER (WHERE state = 'failed') AS windows_failed,
           coalesce(sum(rows), 0) AS rows, coalesce(sum(rejects), 0) AS rejects, coalesce(sum(requests), 0) AS requests
    FROM ${CONTROL_SCHEMA}.windows GROUP BY run_id)
  SELECT r.run_id, r.job_name AS job, r.created_at AS started_at, r.finished_at, r.status,
         json_object('runId', r.run_id, 'job', r.job_name, 'network', r.network, 'jobFile', r.job_file, 'head', r.head,
                     'range', json_object('from', r.range_from, 'to', r.range_to),
                     'totals', json_object('windows', coalesce(t.windows, 0), 'windowsFailed', coalesce(t.windows_failed, 0), 'rows', coalesce(t.rows, 0),
                                           'rejects', coalesce(t.rejects, 0), 'requests', coalesce(t.requests, 0)),
                     'quota', CASE WHEN json_extract(r.job_doc, '$.dailyRequestQuota') IS NOT NULL
                                   THEN json_object('limit', CAST(json_extract(r.job_doc, '$.dailyRequestQuota') AS BIGINT)) END) AS report
  FROM ${CONTROL_SCHEMA}.runs r LEFT JOIN t USING (run_id);
CREATE VIEW windows AS
  SELECT run_id, dataset, network, scope_key AS scope,
         coalesce(covered_from, TRY_CAST(json_extract_string(spec, '$.range.from') AS BIGINT)) AS from_block,
         coalesce(covered_to, TRY_CAST(json_extract_string(spec, '$.range.to') AS BIGINT)) AS to_block,
         NULL::BIGINT AS rows_expected, rows AS rows_got, rejects, requests, NULL::BIGINT AS retries, NULL::BIGINT AS throttles,
         NULL::BIGINT AS cap_hits, NULL::BIGINT AS splits, state AS status, error,
         CASE WHEN state IN ('committed', 'provisional') THEN updated_at END AS committed_at, window_id
  FROM ${CONTROL_SCHEMA}.windows;
CREATE VIEW watermarks AS
  SELECT network, dataset, scope, block, NULL::VARCHAR AS run_id, updated_at FROM ${CONTROL_SCHEMA}.watermarks;
CREATE VIEW request_usage AS
  SELECT CAST(day AS DATE) AS day, account, NULL::VARCHAR AS run_id, requests FROM ${CONTROL_SCHEMA}.request_usage;
`;
