/**
 * verify's `decoded_rows` check: the job's decoded datasets hold exactly what their logs decode to. The lake's
 * `event_logs` are decoded again by the one decoder (decode/decode.ts) into temporary tables, and each decoded
 * dataset is compared with that, row for row on every column but the run's (`_run_id`, `_ingested_at`), and its
 * decode rejects log for log. So a decoded row whose log is gone (replaced by finality, deleted by another writer),
 * a log never decoded (an export before the job's `decode` key), a value that is not its log's decoding and a
 * reject that no longer holds are each seen. ABIs come as a run takes them: the job's files or signatures, the lake's
 * `contracts` dataset, else the API (one request per contract, counted as verify's).
 */
import type { DuckDBConnection } from '@duckdb/node-api';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { allColumns, naturalKey, RUN_COLUMNS, type DecodedDataset } from '../../decode/datasets.js';
import { decodeLogs } from '../../decode/decode.js';
import { abiFromContracts, resolveDatasets } from '../../decode/spec.js';
import { DATASETS } from '../../datasets/registry.js';
import type { VerificationRow } from '../../load/ledger/verifications.js';
import { ident, literal } from '../../load/sql.js';
import type { Job } from '../job.js';

const CHECK = 'decoded_rows';
const PREFIX = '__verify_decoded_';

type Relation = (name: string) => Promise<boolean>;

/** What one decoded dataset holds against its logs' decoding. */
interface Comparison {
  lakeRows: number;
  expectedRows: number;
  /** Rows the logs decode to that the lake lacks (by natural key). */
  missing: number;
  /** Rows of the lake no log decodes to (by natural key). */
  extra: number;
  /** Rows of one key whose values differ from their log's decoding. */
  changed: number;
  rejects: number;
  missingRejects: number;
  staleRejects: number;
}

/**
 * One `decoded_rows` finding per decoded dataset of the job (none when the job decodes nothing or the selection
 * names datasets that are neither `event_logs` nor decoded ones).
 */
export async function decodedRowChecks(conn: DuckDBConnection, job: Job, opts: DecodedCheckOptions): Promise<VerificationRow[]> {
  const spec = job.what.decode;
  if (!spec || !selectsDecoded(opts.datasets)) return [];
  const finding = findingOf(job.what.network);
  let datasets: DecodedDataset[];
  try {
    datasets = await checkedDatasets(conn, job, opts);
  } catch (e) {
    return [finding('decoded', 'not-checked', `the job's decode key could not be resolved: ${(e as Error).message}`)];
  }
  if (datasets.length === 0) return [];
  if (!(await opts.exists('event_logs'))) return datasets.map((d) => finding(d.name, 'not-checked', 'the lake holds no event_logs to decode'));
  const workDir = await mkdtemp(path.join(os.tmpdir(), 'chainlake-verify-decode-'));
  try {
    const out = await decodeLogs({
      conn,
      logs: `SELECT * FROM event_logs WHERE network = ${literal(job.what.network)}`,
      datasets,
      runId: 'verify',
      ingestedAt: new Date(0).toISOString(),
      workDir,
      prefix: PREFIX,
      // Nothing is written to the reader's default database: a local lake's catalog, attached read-only.
      temporary: true,
    });
    const rows: VerificationRow[] = [];
    for (const d of datasets) rows.push(await datasetFinding(conn, d, job.what.network, out, opts));
    await conn.run([...out.tables.values()].map((t) => `DROP TABLE IF EXISTS ${t}`).join('; '));
    return rows;
  } finally {
    await rm(workDir, { recursive: true, force: true });
  }
}

interface DecodedCheckOptions {
  /** The selection's datasets, if it names any. */
  datasets?: readonly string[];
  /** The selection is part of the lake (blocks, days, a sample): the check still reads every log, and says so. */
  partial: boolean;
  exists: Relation;
  /** A contract's ABI from the API, for one the job and the lake do not give. */
  fetchAbi?: (address: string) => Promise<unknown>;
}

/** A `decoded_rows` finding of one dataset (or of the decode key as a whole: `decoded`). */
const findingOf =
  (network: string) =>
  (dataset: string, status: VerificationRow['status'], detail: string, lakeCount: number | null = null): VerificationRow => ({
    check: CHECK,
    dataset,
    network,
    scope: null,
    fromBlock: null,
    toBlock: null,
    status,
    lakeCount,
    apiCount: null,
    detail,
  });

/** The job's decoded datasets the selection names (all when it names `event_logs` or none), their ABIs as a run takes them. */
async function checkedDatasets(conn: DuckDBConnection, job: Job, opts: DecodedCheckOptions): Promise<DecodedDataset[]> {
  const network = job.what.network;
  const contracts = (await opts.exists('contracts')) ? { conn, relation: `SELECT * FROM contracts WHERE network = ${literal(network)}` } : undefined;
  const datasets = await resolveDatasets(job.what.decode!, {
    network,
    ...(contracts ? { contracts } : {}),
    ...(opts.fetchAbi ? { fetchAbi: opts.fetchAbi } : {}),
  });
  const asked = opts.datasets;
  return asked && !asked.includes('event_logs') ? datasets.filter((d) => asked.includes(d.name)) : datasets;
}

/** One decoded dataset against its logs' decoding (`out`). */
async function datasetFinding(
  conn: DuckDBConnection,
  d: DecodedDataset,
  network: string,
  out: Awaited<ReturnType<typeof decodeLogs>>,
  opts: DecodedCheckOptions,
): Promise<VerificationRow> {
  const c = await compare(conn, d, network, {
    expected: out.tables.get(d.name)!,
    lake: (await opts.exists(d.name)) ? d.name : undefined,
    expectedRejects: out.rejects,
    lakeRejects: (await opts.exists('_rejects')) ? '_rejects' : undefined,
  });
  const whole = opts.partial ? ' (all the lake’s logs: decoded rows carry no block number to select by)' : '';
  const found = differences(c);
  return found.length
    ? findingOf(network)(d.name, 'differs', `${found.join('; ')}${whole}: ${fixOf(c)}`, c.lakeRows)
    : findingOf(network)(d.name, 'held', `${c.lakeRows} rows and ${c.rejects} rejects, as the lake's logs decode${whole}`, c.lakeRows);
}

/** Whether a selection of datasets may hold a decoded one: none given, `event_logs`, or a name no exported dataset has. */
const selectsDecoded = (datasets: readonly string[] | undefined): boolean => !datasets || datasets.includes('event_logs') || datasets.some((d) => !DATASETS[d]);

/**
 * The requests the decoded_rows check sends: one per contract of the job's `decode` key whose ABI neither the job
 * (an ABI file, signatures) nor the lake's `contracts` dataset gives. Asked of the lake, as the check resolves them.
 */
export async function abiRequests(conn: DuckDBConnection, job: Job, datasets: readonly string[] | undefined, exists: Relation): Promise<number> {
  const spec = job.what.decode;
  if (!spec || !selectsDecoded(datasets)) return 0;
  const relation = `SELECT * FROM contracts WHERE network = ${literal(job.what.network)}`;
  const hasContracts = await exists('contracts');
  let n = 0;
  for (const c of spec.contracts) if (!c.abiFile && !c.signatures && !(hasContracts && (await abiFromContracts(conn, relation, c.address)))) n++;
  return n;
}

/** What mends a comparison's differences: decoding every log of the lake again writes what they decode to and drops rows whose log is gone. */
const fixOf = (c: Comparison): string =>
  `run \`chainlake decode\` to decode the lake’s logs again${c.extra ? ' (it also drops the rows whose log is gone)' : ''}`;

/** The differences of a comparison in words; none when the dataset holds. */
function differences(c: Comparison): string[] {
  const n = (k: number, one: string, many = `${one}s`): string => `${k} ${k === 1 ? one : many}`;
  return [
    c.missing ? `${n(c.missing, 'row')} the logs decode to missing` : '',
    c.extra ? `${n(c.extra, 'row')} no log of the lake decodes to` : '',
    c.changed ? `${n(c.changed, 'row')} whose values differ from their log's decoding` : '',
    c.missingRejects ? `${n(c.missingRejects, 'log')} rejected by decoding without a reject` : '',
    c.staleRejects ? `${n(c.staleRejects, 'reject')} of logs that now decode` : '',
  ].filter(Boolean);
}

/** Compares one dataset's rows and rejects with its logs' decoding (`expected`, `expectedRejects`). */
async function compare(
  conn: DuckDBConnection,
  d: DecodedDataset,
  network: string,
  t: { expected: string; lake: string | undefined; expectedRejects: string; lakeRejects: string | undefined },
): Promise<Comparison> {
  const run = new Set(RUN_COLUMNS.map((c) => c.name));
  const columns = allColumns(d).filter((c) => !run.has(c.name));
  const key = naturalKey(d).map(ident).join(', ');
  const row = `struct_pack(${columns.map((c) => `${ident(c.name)} := CAST(${ident(c.name)} AS ${c.type})`).join(', ')})`;
  // Rows of contracts the job does not decode (an earlier `chainlake decode` of more tokens) are not this job's to judge.
  const mine = (column: string): string => (d.contracts?.length ? ` AND ${column} IN (${d.contracts.map(literal).join(', ')})` : '');
  const lake = t.lake
    ? `SELECT ${key}, ${row} AS r FROM ${ident(t.lake)} WHERE network = ${literal(network)}${mine(ident(d.contractColumn))}`
    : `SELECT ${key}, NULL AS r FROM ${t.expected} WHERE false`;
  const [rows] = (
    await conn.runAndReadAll(
      `WITH e AS (SELECT ${key}, ${row} AS r FROM ${t.expected}), l AS (${lake})
       SELECT count(l.r) AS lake_rows, count(e.r) AS expected_rows,
              count(*) FILTER (WHERE l.r IS NULL) AS missing, count(*) FILTER (WHERE e.r IS NULL) AS extra,
              count(*) FILTER (WHERE e.r IS NOT NULL AND l.r IS NOT NULL AND e.r IS DISTINCT FROM l.r) AS changed
       FROM e FULL JOIN l USING (${key})`,
    )
  ).getRowObjectsJS() as Record<string, unknown>[];
  const logKey = (entry: string): string => `${entry}->>'$.transaction_hash' AS transaction_hash, CAST(${entry}->>'$.log_index' AS BIGINT) AS log_index`;
  // A reject of a log the lake no longer holds (a reorganised one) is history, as every reject is: only those of
  // logs it holds must agree with their decoding.
  const lakeRejects = t.lakeRejects
    ? `SELECT DISTINCT ${logKey('r.entry')} FROM ${ident(t.lakeRejects)} r WHERE r.network = ${literal(network)} AND r.dataset = ${literal(d.name)} AND r."window" = ${literal(`decode/${d.name}`)}${mine("(r.entry->>'$.address')")}
         AND EXISTS (SELECT 1 FROM event_logs x WHERE x.network = ${literal(network)} AND x.transaction_hash = (r.entry->>'$.transaction_hash') AND x.log_index = CAST((r.entry->>'$.log_index') AS BIGINT))`
    : `SELECT NULL::VARCHAR AS transaction_hash, NULL::BIGINT AS log_index WHERE false`;
  const [rej] = (
    await conn.runAndReadAll(
      `WITH e AS (SELECT DISTINCT ${logKey('entry')} FROM ${t.expectedRejects} WHERE dataset = ${literal(d.name)}), l AS (${lakeRejects})
       SELECT count(l.log_index) AS rejects, count(*) FILTER (WHERE l.log_index IS NULL) AS missing, count(*) FILTER (WHERE e.log_index IS NULL) AS stale
       FROM e FULL JOIN l USING (transaction_hash, log_index)`,
    )
  ).getRowObjectsJS() as Record<string, unknown>[];
  return {
    lakeRows: Number(rows!.lake_rows),
    expectedRows: Number(rows!.expected_rows),
    missing: Number(rows!.missing),
    extra: Number(rows!.extra),
    changed: Number(rows!.changed),
    rejects: Number(rej!.rejects),
    missingRejects: Number(rej!.missing),
    staleRejects: Number(rej!.stale),
  };
}
