/**
 * A worker's share of the work: one queued window fetched through the same extract and transform as a
 * single-machine run, typed by DuckDB with the lake's casts, and written to the store as an immutable Parquet
 * fragment (and a fragment of its rejects), then recorded as `fetched` in the control plane. Nothing in the
 * lake changes here: the committer folds fragments in.
 */
import { chainlakeCodeOf, SETUP_CODES } from '../errors.js';
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import type PgBoss from 'pg-boss';
import { UNREACHABLE_HINT } from '../extract/errors.js';
import { countsOf, executeWindow, stagedOf, type Clients } from '../pipeline/execute.js';
import type { Job } from '../pipeline/job.js';
import type { Logger } from '../pipeline/log.js';
import { receivingBodies } from '../pipeline/garbage.js';
import type { PagerOptions } from '../extract/pager.js';
import type { DuckDBConnection } from '@duckdb/node-api';
import { rejectsSelect, stagedSelect } from '../load/write/commit.js';
import { encodeCalls } from '../load/ledger/requests.js';
import type { BlockTimeBook } from '../load/ledger/block-times.js';
import { ident, literal } from '../load/sql.js';
import { testHook } from '../load/test-hooks.js';
import { STAGED_PARTITION } from '../load/schema.js';
import type { RowTransformer } from '../transform/rows.js';
import { CONTROL_SCHEMA, controlLedger } from './control-plane.js';
import { countColumns, recordFetched } from '../load/ledger/windows.js';
import { insertWindow } from './enqueue.js';
import { sendWindow, type QueueSettings, type WindowJob } from './queue.js';
import type { Store } from './store.js';
import { windowOfSpec, windowSpecOf, type WindowSpec } from './windows.js';

/** What a worker holds for one run: the job as its enqueuer stored it, parsed with this machine's environment. */
export interface RunContext {
  runId: string;
  job: Job;
  ingestedAt: string;
  clients: Clients;
  pager: PagerOptions;
  transformers: Map<string, RowTransformer>;
  transformerFor(dataset: string): RowTransformer;
  /** The run's block times, shared by its workers through the control plane (load/ledger/block-times.ts). */
  blockTimes?: BlockTimeBook;
}

export interface FetchDeps {
  client: pg.Client;
  boss: PgBoss;
  /** A DuckDB connection of this slot's own (fragments are typed on it). */
  duck: DuckDBConnection;
  /**
   * Runs a fragment's typing (read_json into Parquet) when no other slot of the worker is typing one: each
   * reader of staged JSON takes buffers of twice its largest object, and the worker's slots typing at once ran
   * its engine out of memory (a window failed and was retried). Fetching stays concurrent.
   */
  typing: <T>(fn: () => Promise<T>) => Promise<T>;
  store: Store;
  settings: QueueSettings;
  workerId: string;
  /** This slot's own scratch folder (its windows' pages and rows before they are typed, in files named by window). */
  scratch: string;
  log: Logger;
}

export type FetchResult =
  | { state: 'fetched'; dataset: string; rows: number; requests: number; throttles: number }
  | { state: 'skipped' }
  | { state: 'failed'; error: string; dataset?: string; requests?: number; throttles?: number; setup?: SetupProblem };

/**
 * A failure no retry fixes, which a person must (a key the API refuses, an API address nothing answers at): what a
 * single-machine run exits 2 for.
 */
export interface SetupProblem {
  problem: string;
  hint?: string;
}

function setupProblemOf(outcome: Outcome): SetupProblem | undefined {
  // As a single-machine run decides it: nothing answered, not one response (src/pipeline/run.ts unreachableOrigins).
  if (outcome.unreachable !== undefined && outcome.acct.responses === 0)
    return { problem: `nothing answers at ${outcome.unreachable}`, hint: UNREACHABLE_HINT };
  const code = chainlakeCodeOf(outcome.failure);
  if (code !== undefined && SETUP_CODES.has(code)) return { problem: outcome.error ?? 'refused', hint: (outcome.failure as { hint?: string }).hint };
  return undefined;
}

let nextIndex = 0;

type Outcome = Awaited<ReturnType<typeof executeWindow>>;

/** Fetches one queued window into a fragment and records it; an error is recorded and rethrown for the queue. */
export async function fetchWindow(job: PgBoss.Job<WindowJob>, run: RunContext, deps: FetchDeps): Promise<FetchResult> {
  const { client, log } = deps;
  const { runId, windowId } = job.data;
  const row = (await client.query(`SELECT spec, status FROM ${CONTROL_SCHEMA}.windows WHERE run_id = $1 AND window_id = $2`, [runId, windowId])).rows[0];
  // Fetched by a worker whose turn expired, or committed already: the queue offered it again, nothing is left to do.
  if (!row || row.status !== 'queued') return { state: 'skipped' };
  const spec = row.spec as WindowSpec;
  const w = windowOfSpec(spec);
  // The slot's folder holds the window's staged files, named by this index; each is removed when the window
  // ends. (A folder per window cost its creation and a recursive removal: a dozen file-system calls per window.)
  // Receiving bodies as a single machine's run does: the body pool's spare buffers go once no window fetches.
  const outcome = await receivingBodies(() =>
    executeWindow(w, {
      clients: run.clients,
      transformer: run.transformerFor(w.def.name),
      pager: run.pager,
      stagingDir: deps.scratch,
      index: nextIndex++,
      strict: run.job.lake.strict,
      log,
      blockTimes: run.blockTimes,
    }),
  );
  const written: string[] = [];
  try {
    if (outcome.error) return await recordFailure(deps, job.data, outcome);
    const fragments = await writeFragments(deps, run, outcome, written);
    await testHook('fragment');
    if (!(await recordWindow(deps, job, spec, outcome, fragments))) {
      // Another worker recorded the window first: its fragment stands, ours goes.
      await Promise.all(written.splice(0).map((f) => deps.store.remove(f)));
      return { state: 'skipped' };
    }
    written.length = 0;
    log.log('info', 'window.fetched', `${windowId}: ${outcome.rows} rows, ${outcome.acct.requests} requests`, {
      run: runId,
      window: windowId,
      rows: outcome.rows,
      requests: outcome.acct.requests,
    });
    return { state: 'fetched', dataset: w.def.name, rows: outcome.rows, requests: outcome.acct.requests, throttles: outcome.acct.throttles };
  } finally {
    // A fragment written but never recorded (a failure between the two) is nobody's: remove it now.
    await Promise.all(written.map((f) => deps.store.remove(f).catch(() => undefined)));
    await outcome.stage?.discard().catch(() => undefined);
    await outcome.rejectStage?.discard().catch(() => undefined);
    await outcome.pageStage?.discard().catch(() => undefined);
  }
}

/**
 * A window that failed: its attempt, error and what the attempt counted on its row, as a single-machine run records
 * a failed window (the queue decides whether it is offered again).
 */
async function recordFailure(deps: FetchDeps, key: WindowJob, outcome: Outcome): Promise<FetchResult> {
  const counts = Object.entries(countColumns(countsOf(outcome)));
  await deps.client.query(
    `UPDATE ${CONTROL_SCHEMA}.windows SET attempts = attempts + 1, error = $3, worker = $4, updated_at = NOW(),
       ${counts.map(([column], i) => `${ident(column)} = $${i + 5}`).join(', ')}
     WHERE run_id = $1 AND window_id = $2`,
    [key.runId, key.windowId, outcome.error, deps.workerId, ...counts.map(([, n]) => n)],
  );
  return {
    state: 'failed',
    error: outcome.error!,
    dataset: outcome.window.def.name,
    requests: outcome.acct.requests,
    throttles: outcome.acct.throttles,
    setup: setupProblemOf(outcome),
  };
}

/** A window's fragments in the store: where its rows and its rejects are (null for none). */
interface Fragments {
  rows: string | null;
  rejects: string | null;
}

/** Types the window's rows and rejects into fragments in the store; each location is added to `written` as it is made. */
async function writeFragments(deps: FetchDeps, run: RunContext, outcome: Outcome, written: string[]): Promise<Fragments> {
  const { runId, ingestedAt } = run;
  const w = outcome.window;
  const staged = stagedOf(outcome);
  const rows =
    staged.stagedFiles.length + staged.pageFiles.length > 0
      ? await storeFragment(deps, runId, w.def.name, stagedSelect(w.def, runId, ingestedAt, staged.stagedFiles, staged.pageFiles), written)
      : null;
  const rejectStage = outcome.rejectStage;
  const rejects =
    rejectStage && outcome.rejects > 0
      ? await storeFragment(
          deps,
          runId,
          '_rejects',
          // Rejects are a log partitioned by the date of the run that saw them (as on a single machine).
          `SELECT *, ${literal(ingestedAt.slice(0, 10))} AS ${ident(STAGED_PARTITION)} FROM (${rejectsSelect([rejectStage.file], w.network, runId, ingestedAt)})`,
          written,
        )
      : null;
  return { rows, rejects };
}

/** One fragment: `select` typed by DuckDB into a Parquet file of the store (under the slot's typing turn). */
async function storeFragment(deps: FetchDeps, runId: string, name: string, select: string, written: string[]): Promise<string> {
  const target = await deps.store.fragmentTarget(runId, `${name}-${randomUUID()}.parquet`);
  written.push(target.location);
  await deps.typing(() => deps.duck.run(`COPY (${select}) TO ${literal(target.writePath)} (FORMAT parquet, COMPRESSION zstd)`));
  await deps.store.putFragment(target);
  return target.location;
}

/**
 * Records the window as fetched, with the rest of its range queued as a window of its own when it stopped at its
 * row target (in one transaction); false when another worker recorded it first (this one's turn had expired).
 */
async function recordWindow(deps: FetchDeps, job: PgBoss.Job<WindowJob>, spec: WindowSpec, outcome: Outcome, fragments: Fragments): Promise<boolean> {
  const { client } = deps;
  const { runId, windowId } = job.data;
  const covered = outcome.window.range;
  const record = (): Promise<boolean> =>
    recordFetched(
      controlLedger(client),
      { runId, windowId },
      {
        fragmentPath: fragments.rows,
        rejectPath: fragments.rejects,
        // The rows of its fragment, by which the committer sizes a batch.
        ...countsOf(outcome),
        rowsGot: outcome.rows,
        fromBlock: covered?.from ?? null,
        toBlock: covered?.to ?? null,
        worker: deps.workerId,
        // Its calls (lineage), recorded in `requests` by the commit that records the window.
        requestLog: encodeCalls(outcome.acct.calls),
        // The times of its first and last block, by which its rows replace the lake's (finality of event_logs).
        ...(outcome.window.times ? { spec: JSON.stringify({ ...spec, times: outcome.window.times }) } : {}),
      },
    );
  // Without a rest, the record alone is one statement.
  if (!outcome.rest) return record();
  await client.query('BEGIN');
  try {
    const rest = windowSpecOf({ ...windowOfSpec(spec), range: outcome.rest });
    const restId = windowOfSpec(rest).id;
    await insertWindow(client, runId, restId, rest);
    // With its parent's timeout: the enqueuer chose it for this run's windows.
    await sendWindow(
      deps.boss,
      client,
      { runId, windowId: restId },
      { ...deps.settings, windowTimeoutSeconds: Math.max(1, Math.round(Number(job.expireInSeconds)) || deps.settings.windowTimeoutSeconds) },
    );
    const recorded = await record();
    await client.query(recorded ? 'COMMIT' : 'ROLLBACK');
    return recorded;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}
