// What a worker asks of the control plane and the queue between windows: what is fetched and waiting for a commit,
// what is still due, windows nobody will fetch, and a window put off to another day.
import type PgBoss from 'pg-boss';
import type pg from 'pg';
import { recordFailed } from '../load/ledger/windows.js';
import { CONTROL_SCHEMA, QUEUE_SCHEMA, WINDOW_QUEUE, controlLedger } from './control-plane.js';
import { DEFAULT_QUEUE_SETTINGS, windowJobId, type WindowJob } from './queue.js';
import { closeEndedRuns } from './runs.js';
import type { QueueState } from '../observe/worker-metrics.js';

/** The queue as the control plane has it, for the metrics' gauges. */
export async function queueState(client: Pick<pg.Client, 'query'>): Promise<QueueState> {
  const r = (
    await client.query(
      `SELECT count(*) FILTER (WHERE w.status = 'queued')::BIGINT AS queued, count(*) FILTER (WHERE w.status = 'fetched')::BIGINT AS fetched,
              count(*) FILTER (WHERE w.status = 'failed')::BIGINT AS failed,
              COALESCE(EXTRACT(EPOCH FROM NOW() - min(w.updated_at) FILTER (WHERE w.status = 'fetched')), 0)::FLOAT8 AS lag
       FROM ${CONTROL_SCHEMA}.windows w JOIN ${CONTROL_SCHEMA}.runs r ON r.run_id = w.run_id WHERE r.finished_at IS NULL`,
    )
  ).rows[0];
  const active = (await client.query(`SELECT count(*)::BIGINT AS n FROM ${QUEUE_SCHEMA}.job WHERE name = $1 AND state = 'active'`, [WINDOW_QUEUE])).rows[0];
  const usage = await client.query(`SELECT account, requests FROM ${CONTROL_SCHEMA}.request_usage WHERE day = CAST($1 AS DATE)`, [
    new Date().toISOString().slice(0, 10),
  ]);
  return {
    queued: Number(r.queued) - Number(active.n),
    active: Number(active.n),
    fetched: Number(r.fetched),
    failed: Number(r.failed),
    commitLagSeconds: Number(r.lag),
    quotaUsedToday: usage.rows.map((u) => ({ account: String(u.account), requests: Number(u.requests) })),
  };
}

/**
 * Rows fetched by every worker (of run `runId` only, when given) and not yet committed, and how long the oldest of
 * them has waited.
 */
export async function fetchedState(client: pg.Client, runId?: string): Promise<{ rows: number; waitedSeconds: number }> {
  const r = await client.query(
    `SELECT COALESCE(sum(rows_got), 0)::BIGINT AS n, count(*)::BIGINT AS w, COALESCE(EXTRACT(EPOCH FROM NOW() - min(updated_at)), 0)::FLOAT8 AS age
     FROM ${CONTROL_SCHEMA}.windows WHERE status = 'fetched'${runId === undefined ? '' : ' AND run_id = $1'}`,
    runId === undefined ? [] : [runId],
  );
  // A fetched window with no row still waits for its commit (its watermark and its run's end).
  return { rows: Number(r.rows[0].n) + Number(r.rows[0].w), waitedSeconds: Number(r.rows[0].age) };
}

/**
 * The queue's last windows are being fetched: some in flight, none waiting to be taken (or to be retried soon). While
 * windows wait in the queue the worker commits what is fetched: workers sharing an account take turns, and a worker
 * whose account is busy would otherwise hold every commit until the queue runs dry.
 */
export async function lastWindowsInFlight(client: pg.Client): Promise<boolean> {
  const r = await client.query(
    `SELECT count(*) FILTER (WHERE state = 'active')::BIGINT AS active,
            count(*) FILTER (WHERE state IN ('created', 'retry') AND start_after < NOW() + interval '5 seconds')::BIGINT AS waiting
     FROM ${QUEUE_SCHEMA}.job WHERE name = $1`,
    [WINDOW_QUEUE],
  );
  return Number(r.rows[0].active) > 0 && Number(r.rows[0].waiting) === 0;
}

/** Windows still `queued` whose queue job is over (failed for good): nobody will fetch them. */
const ABANDONED = `FROM ${CONTROL_SCHEMA}.windows w WHERE w.status = 'queued'
  AND NOT EXISTS (SELECT 1 FROM ${QUEUE_SCHEMA}.job j WHERE j.name = '${WINDOW_QUEUE}' AND j.id = w.job_id AND j.state IN ('created', 'retry', 'active'))`;

export async function abandonedWindows(client: pg.Client): Promise<number> {
  return Number((await client.query(`SELECT count(*)::BIGINT AS n ${ABANDONED}`)).rows[0].n);
}

/** Marks abandoned windows failed and ends the runs left with nothing to do (run by the lease holder). */
export async function closeAbandoned(client: pg.Client): Promise<void> {
  const abandoned = (await client.query(`SELECT w.run_id, w.window_id ${ABANDONED}`)).rows;
  await recordFailed(
    controlLedger(client),
    abandoned.map((r) => ({ runId: String(r.run_id), windowId: String(r.window_id) })),
  );
  const open = (await client.query(`SELECT run_id FROM ${CONTROL_SCHEMA}.runs WHERE finished_at IS NULL`)).rows.map((r) => String(r.run_id));
  if (open.length > 0) await inTransaction(client, () => closeEndedRuns((text, values) => client.query(text, values), open));
}

/** Runs `work` in a transaction on `client`: committed when it resolves, rolled back when it throws. */
export async function inTransaction<T>(client: pg.Client, work: () => Promise<T>): Promise<T> {
  await client.query('BEGIN');
  try {
    const result = await work();
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}

/**
 * No window (of run `runId` only, when given) is due now or soon (queued, taken by a worker, or waiting to be
 * retried), and no run is open but for windows queued for a later day (a spent quota).
 */
export async function nothingDue(client: pg.Client, runId?: string): Promise<boolean> {
  const due = await client.query(
    `SELECT count(*)::BIGINT AS n FROM ${QUEUE_SCHEMA}.job WHERE name = $1 AND state IN ('created', 'retry', 'active') AND start_after < NOW() + interval '5 minutes'
     ${runId === undefined ? '' : `AND ${OF_RUN}`}`,
    runId === undefined ? [WINDOW_QUEUE] : [WINDOW_QUEUE, runId],
  );
  return Number(due.rows[0].n) === 0;
}

/** A queue job (`id` of the queue's job table) that is the current job of a window of run $2. */
const OF_RUN = `id IN (SELECT w.job_id FROM ${CONTROL_SCHEMA}.windows w WHERE w.run_id = $2)`;

/**
 * Takes the next due window of run `runId` off the queue, as pg-boss's `fetch` takes the next of every run: the same
 * statement (pg-boss 10's fetchNextJob, the window queue's `standard` policy), narrowed to the run's windows, since
 * pg-boss's fetch filters on nothing but the queue's name. A worker that works one run (`verify --repair`'s) leaves
 * every other run's windows in the queue for the workers of their own.
 */
export async function takeRunWindow(client: pg.Client, runId: string): Promise<PgBoss.JobWithMetadata<WindowJob> | undefined> {
  const taken = await client.query(
    `WITH next AS (
       SELECT id FROM ${QUEUE_SCHEMA}.job
       WHERE name = $1 AND state < 'active' AND start_after < NOW() AND ${OF_RUN}
       ORDER BY priority DESC, created_on, id
       LIMIT 1
       FOR UPDATE SKIP LOCKED
     )
     UPDATE ${QUEUE_SCHEMA}.job j SET state = 'active', started_on = NOW(),
       retry_count = CASE WHEN started_on IS NOT NULL THEN retry_count + 1 ELSE retry_count END
     FROM next WHERE j.name = $1 AND j.id = next.id
     RETURNING j.id, j.name, j.data, EXTRACT(epoch FROM j.expire_in) AS "expireInSeconds", j.policy, j.state, j.priority,
       j.retry_limit AS "retryLimit", j.retry_count AS "retryCount", j.retry_delay AS "retryDelay", j.retry_backoff AS "retryBackoff",
       j.start_after AS "startAfter", j.started_on AS "startedOn", j.singleton_key AS "singletonKey", j.singleton_on AS "singletonOn",
       j.expire_in AS "expireIn", j.created_on AS "createdOn", j.completed_on AS "completedOn", j.keep_until AS "keepUntil",
       j.dead_letter AS "deadLetter", j.output`,
    [WINDOW_QUEUE, runId],
  );
  return taken.rows[0] as PgBoss.JobWithMetadata<WindowJob> | undefined;
}

/** The next 00:00 UTC after `now`. */
export function nextUtcDay(now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1));
}

/** Ends a window's queue job and queues it again to start at `at` (a new job id: the old one stays completed). */
export async function requeueAt(client: pg.Client, boss: PgBoss, job: PgBoss.JobWithMetadata<WindowJob>, at: Date): Promise<void> {
  // Derived from the job it replaces: unique however often a window is put off, the same on every retry of this.
  const next = windowJobId(job.data.runId, `${job.data.windowId}#after:${job.id}`);
  await client.query('BEGIN');
  try {
    await boss.complete(WINDOW_QUEUE, job.id, {}, { db: { executeSql: (text: string, values: unknown[]) => client.query(text, values) } });
    await boss.send(WINDOW_QUEUE, job.data, {
      id: next,
      startAfter: at,
      retryLimit: job.retryLimit,
      retryDelay: 1,
      expireInSeconds: Math.max(1, Math.round(Number(job.expireInSeconds)) || DEFAULT_QUEUE_SETTINGS.windowTimeoutSeconds),
      db: { executeSql: (text: string, values: unknown[]) => client.query(text, values) },
    });
    await client.query(`UPDATE ${CONTROL_SCHEMA}.windows SET job_id = $3, error = NULL, updated_at = NOW() WHERE run_id = $1 AND window_id = $2`, [
      job.data.runId,
      job.data.windowId,
      next,
    ]);
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
