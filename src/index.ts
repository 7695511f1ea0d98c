/**
 * chainlake as a library: run jobs, export one dataset, query a lake, or stream a dataset's typed rows as Apache
 * Arrow record batches without a lake.
 *
 * Importing this module runs no command, changes no V8 flag, forces no garbage collection and sets no
 * environment variable: the CLI's runtime tuning (docs/performance.md) is the CLI's alone.
 *
 * @example
 * ```ts
 * import { exportDataset, openLake } from 'chainlake';
 * await exportDataset({ dataset: 'blocks', lake: '/tmp/lake', target: 'simulator', toBlock: 500, spec: { blocks: ['0-500'] } });
 * const lake = await openLake('/tmp/lake');
 * for await (const row of lake.query('SELECT count(*) AS n FROM blocks')) console.log(row.n);
 * await lake.close();
 * ```
 * @packageDocumentation
 */
import type { DuckDBResult, DuckDBValueConverter, JS } from '@duckdb/node-api';
import { DuckDBDecimalValue, DuckDBTypeId, JSDuckDBValueConverter } from './ducklake/node-api.js';
import type { RecordBatch } from 'apache-arrow';
import { ChainlakeError } from './errors.js';
import { arrowBatches, DEFAULT_BATCH_ROWS } from './load/read/arrow.js';
import { LakePaths } from './load/paths.js';
import { openLakeReader, type LakeReader } from './load/read/reader.js';
import { streamQuery } from './load/read/query.js';
import { loadJobFile, parseJob, type Job } from './pipeline/job.js';
import type { Logger } from './pipeline/log.js';
import type { RunReport } from './pipeline/report.js';
import { runJob as runPipeline } from './pipeline/run.js';
import { streamJobBatches, type StreamedWindow } from './pipeline/stream.js';
import { lakeReportHtml } from './report/report.js';
import { storeConnectionFrom } from './distributed/store.js';

// The error family: every error chainlake raises on purpose is a ChainlakeError with a stable `code`
// (ERROR_CODES); match on `err.code` (or chainlakeCodeOf), which also holds across two copies of the package.
export { ChainlakeError, chainlakeCodeOf, ERROR_CODES, type ChainlakeErrorCode, type ChainlakeErrorOptions } from './errors.js';
export { JobError } from './pipeline/job.js';
export { StrictRejectsError } from './pipeline/execute.js';
export { NoLakeError } from './load/read/reader.js';
export { LakeLockedError, LakeAccessError } from './load/lock.js';
export { CatalogDamagedError } from './load/catalog-damage.js';
export { QueryFailedError, QueryRefusedError } from './load/read/query.js';
export { UnknownDatasetError } from './datasets/registry.js';
export { ApiError, ApiUnreachableError, WindowError } from './extract/errors.js';
export { ShapeError } from './extract/endpoint.js';
export { QuotaReachedError } from './extract/quota.js';
export { OrdinalOrderError } from './transform/rows.js';
export { DuckLakeError } from './ducklake/catalog-db.js';
export { LakeChangedError } from './ducklake/conflicts.js';
export { AbiError, DecodeSpecError } from './decode/spec.js';
export { DecodeValueError } from './decode/types.js';
export { StoreError } from './distributed/store.js';
export { ControlPlaneError, LeaseLostError } from './distributed/errors.js';
export { WindowTransitionError } from './load/ledger/windows.js';
export { datasetNames } from './datasets/registry.js';
/** Hear when a call waits for a lake's catalog.duckdb held by another process (the CLI prints it): what waits, the holder, for how long at most. */
export { CatalogLockedError, onCatalogWait, setCatalogWaitMs, type CatalogWait } from './load/catalog-wait.js';
import type { JobDocument as JobFile } from './pipeline/job-options.js';
export type { RunReport, DatasetReport } from './pipeline/report.js';
export type { LakeReportData } from './report/report.js';
export type { Logger, Level } from './pipeline/log.js';
export type { StreamedWindow } from './pipeline/stream.js';
export type { RecordBatch } from 'apache-arrow';

/**
 * A job as its JSON file holds it (see `jobs/` and `chainlake schema`), typed from the job options' one
 * declaration (src/pipeline/job-options.ts). Validated exactly as a job file is; a problem throws {@link JobError}.
 */
export type JobDocument = JobFile;

/** Options of {@link runJob} and {@link exportDataset}. */
export interface RunJobOptions {
  /** Receives the run's events (none by default). */
  logger?: Logger;
  /** The lake directory, instead of the job's `lake`. */
  lake?: string;
  /** Fetch the job's whole range again, ignoring watermarks and unfinished runs. */
  fullRefresh?: boolean;
  /** An explicit block range for this run only (no resume, no incremental narrowing). */
  fromBlock?: number;
  toBlock?: number;
  /** If another run holds the lake, wait for it instead of throwing {@link LakeLockedError}. */
  waitForLock?: boolean;
}

/** The job resolved once, with the caller's `lake` over the job's (the library reads the process's environment, as the CLI does). */
async function jobOf(job: string | JobDocument, lake: string | undefined): Promise<Job> {
  const overrides = lake === undefined ? {} : { lake };
  return typeof job === 'string' ? await loadJobFile(job, process.env, overrides) : parseJob(job, 'job object', process.env, overrides);
}

/**
 * Runs a job (a job file's path, or the object such a file holds) into its lake and returns the run's report.
 * A run that loses some windows resolves with `status: 'partial'` or `'failed'` (a later run resumes them);
 * it throws only when it cannot run at all (a bad job, a locked or unwritable lake).
 */
export async function runJob(job: string | JobDocument, options: RunJobOptions = {}): Promise<RunReport> {
  const parsed = await jobOf(job, options.lake);
  const range = options.fromBlock !== undefined || options.toBlock !== undefined ? { fromBlock: options.fromBlock, toBlock: options.toBlock } : undefined;
  return runPipeline(parsed, { logger: options.logger, fullRefresh: options.fullRefresh, waitForLock: options.waitForLock, rangeOverride: range });
}

/** The lake {@link lakeReport} reads: a local lake's folder, or a distributed lake's PostgreSQL URL (and its files' store). */
export type ReportLake = { lake: string } | { catalog: string; store?: string };

/**
 * A lake (local or distributed) as one self-contained HTML page, as `chainlake report` writes it: coverage of
 * each dataset and scope, runs, requests per day against the daily quota, rows per day, rejects and snapshots.
 * The page's data is also in it as JSON (`<script type="application/json" id="chainlake-report-data">`).
 */
export async function lakeReport(lake: ReportLake): Promise<string> {
  // An s3:// store reached as the host's AWS variables say, as the CLI reaches it.
  return lakeReportHtml(
    'lake' in lake
      ? { kind: 'local', lake: lake.lake }
      : { kind: 'distributed', catalog: lake.catalog, store: lake.store, storeConnection: storeConnectionFrom(process.env) },
  );
}

/** Which dataset to fetch, from where, and for which scopes and blocks (the library's `chainlake export`). */
export interface DatasetRequest {
  /** A dataset name (see {@link datasetNames} and `chainlake describe`). */
  dataset: string;
  /**
   * The dataset's scopes and options as a job file's `datasets.<name>` entry holds them, e.g.
   * `{ addresses: ['0x…'] }`, `{ contracts: ['0x…'], topics: ['0xddf2…'] }`, `{ blocks: ['0-500'] }`.
   */
  spec?: Record<string, unknown>;
  /** First block (default 0). */
  fromBlock?: number;
  /** Last block (default: the head, pinned when the run starts). */
  toBlock?: number;
  /**
   * The job options an export takes, with a job file's types and defaults (`network`, `target`: `"api"` with
   * `endpoints` and `apiKey` or their variables, or `"simulator"` with `simulator`; `concurrency`, `rps`, `strict`).
   */
  network?: JobFile['network'];
  target?: JobFile['target'];
  simulator?: JobFile['simulator'];
  endpoints?: JobFile['endpoints'];
  /** Never logged, printed or stored. */
  apiKey?: JobFile['apiKey'];
  concurrency?: JobFile['concurrency'];
  rps?: JobFile['rps'];
  strict?: JobFile['strict'];
}

function requestDocument(r: DatasetRequest, lake?: string): JobDocument {
  const doc: JobDocument = {
    name: `export-${r.dataset}`,
    network: r.network ?? 'mainnet',
    target: r.target ?? 'api',
    range: { fromBlock: r.fromBlock ?? 0, ...(r.toBlock !== undefined ? { toBlock: r.toBlock } : {}) },
    datasets: { [r.dataset]: r.spec ?? {} },
  };
  if (lake !== undefined) doc.lake = lake;
  if (r.simulator) doc.simulator = r.simulator;
  if (r.endpoints) doc.endpoints = r.endpoints;
  if (r.apiKey !== undefined) doc.apiKey = r.apiKey;
  if (r.concurrency !== undefined) doc.concurrency = r.concurrency;
  if (r.rps !== undefined) doc.rps = r.rps;
  if (r.strict !== undefined) doc.strict = r.strict;
  return doc;
}

/** Exports one dataset into a lake (as `chainlake export` does) and returns the run's report. */
export async function exportDataset(request: DatasetRequest & { lake: string }, options: Omit<RunJobOptions, 'lake'> = {}): Promise<RunReport> {
  return runJob(requestDocument(request, request.lake), options);
}

/** Options of {@link streamDataset}. */
export interface StreamOptions {
  /** Rows per record batch (default 16,384). */
  batchRows?: number;
  /** Called after each window's batches, with its row, reject and request counts. */
  onWindow?: (w: StreamedWindow) => void;
  logger?: Logger;
}

/**
 * A dataset's typed rows for a scope and block range, as Apache Arrow record batches, without a lake. The rows
 * go through the same transform and the same DuckDB casts as a lake's, and the batches have the columns and
 * types of the dataset's lake view (BIGINT as Int64, amounts as Decimal128(38,0), timestamps as Timestamp(µs,
 * UTC), then `network` and the partition date). Windows come one at a time in block order; memory stays
 * bounded whatever the range. Rows are not merged on their natural key as a lake does, and entries that do not
 * convert are left out (counted in `onWindow`; `strict: true` makes them an error). A window that fails ends the
 * stream with a {@link ChainlakeError} naming it, with the failure's code and hint (`CHAINLAKE_WINDOWS_FAILED` when it
 * has none). Breaking out of the loop stops the fetching and removes the temporary files.
 *
 * @example
 * ```ts
 * for await (const batch of streamDataset({ dataset: 'transactions', target: 'simulator', spec: { addresses: ['0x…'] }, toBlock: 20_000 })) {
 *   console.log(batch.numRows, batch.schema.fields.map((f) => `${f.name}: ${f.type}`));
 * }
 * ```
 */
export async function* streamDataset(request: DatasetRequest, options: StreamOptions = {}): AsyncGenerator<RecordBatch, void, undefined> {
  const job = parseJob(requestDocument(request), 'stream request', process.env);
  yield* streamJobBatches(job, { logger: options.logger, batchRows: options.batchRows, onWindow: options.onWindow });
}

/**
 * A query result row: column name -> value. BIGINT and HUGEINT are `bigint`; DECIMAL is `bigint` when its scale
 * is 0 (amounts in wei), its exact text otherwise; timestamps and dates are `Date`; lists are arrays.
 */
export type Row = Record<string, unknown>;

/** DuckDB's JS conversion, except exact decimals (DuckDB's own gives a lossy double). */
const exact: DuckDBValueConverter<JS> = (value, type, converter) => {
  if (type.typeId === DuckDBTypeId.DECIMAL && value instanceof DuckDBDecimalValue) return value.scale === 0 ? value.value : value.toString();
  return JSDuckDBValueConverter(value, type, converter);
};

/** An open lake: read-only SQL over its catalog. Close it to let runs commit (a reader holds a snapshot). */
export interface Lake {
  /** The lake's directory. */
  readonly path: string;
  /** Set when the lake was moved and is read-only here: its views were redirected for this reader only. */
  readonly movedFrom?: string;
  /**
   * Runs SQL (every dataset is a view; also `_rejects`, `runs`, `windows`, `files`, `watermarks`) and yields
   * the last statement's rows as they are read: a result of any size is streamed, never held whole. Statements
   * that write files (COPY, EXPORT, INSTALL…) are refused with {@link QueryRefusedError}; a query DuckDB stops as
   * it runs (a value that does not cast, a file it cannot read) throws {@link QueryFailedError}, after the rows read
   * before it: a result ends only with its last row.
   */
  query(sql: string): AsyncGenerator<Row, void, undefined>;
  /** The same, as Apache Arrow record batches (the type mapping of {@link streamDataset}). */
  queryArrow(sql: string, options?: { batchRows?: number }): AsyncGenerator<RecordBatch, void, undefined>;
  close(): Promise<void>;
}

class OpenLake implements Lake {
  private busy = false;
  constructor(
    readonly path: string,
    private readonly reader: LakeReader,
  ) {}

  get movedFrom(): string | undefined {
    return this.reader.movedFrom;
  }

  private async *results<T>(sql: string, read: (r: DuckDBResult) => AsyncIterable<T>): AsyncGenerator<T, void, undefined> {
    // One connection: a second result while one streams would cut the first short.
    if (this.busy)
      throw new ChainlakeError('another query of this lake is still being read: finish (or break out of) it first', {
        code: 'CHAINLAKE_USAGE',
        hint: 'read each result to its end, or open the lake once per concurrent reader',
      });
    this.busy = true;
    try {
      yield* read(await streamQuery(this.reader.conn, sql));
    } finally {
      this.busy = false;
    }
  }

  async *query(sql: string): AsyncGenerator<Row, void, undefined> {
    for await (const rows of this.results(sql, (r) => r.yieldConvertedRowObjects(exact))) yield* rows;
  }

  queryArrow(sql: string, options: { batchRows?: number } = {}): AsyncGenerator<RecordBatch, void, undefined> {
    return this.results(sql, (r) => arrowBatches(r, options.batchRows ?? DEFAULT_BATCH_ROWS));
  }

  async close(): Promise<void> {
    this.reader.close();
  }
}

/**
 * Opens a lake for reading. It waits out a commit in progress and always reads a committed state; it also
 * finishes a killed writer's commit and updates the views of a moved lake when it may write there. A lake
 * copied read-only elsewhere is readable too. Throws {@link NoLakeError} when `dir` holds no lake.
 */
export async function openLake(dir: string): Promise<Lake> {
  const paths = new LakePaths(dir);
  return new OpenLake(paths.root, await openLakeReader(paths));
}
