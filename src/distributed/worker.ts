/**
 * `chainlake worker`: takes queued windows one at a time, fetches each into a fragment on the store, and
 * between windows (or when the queue is empty) commits what is fetched if it can take the committer lease.
 * Any number run side by side on any machines; a worker killed at any point loses at most the window it held
 * (the queue offers it again once its timeout passes) and never leaves the lake half-committed.
 */
import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pLimit from 'p-limit';
import type PgBoss from 'pg-boss';
import { openEngine, type Engine } from '../load/engine.js';
import { parseJob, type Job } from '../pipeline/job.js';
import { silentLogger, type Logger } from '../pipeline/log.js';
import { WINDOW_ROWS } from '../pipeline/plan.js';
import { pagerOptionsOf } from '../pipeline/prepare.js';
import { openSource } from '../pipeline/source.js';
import { RowTransformer } from '../transform/rows.js';
import { getDataset } from '../datasets/registry.js';
import { COMMIT_WINDOWS, commitFetched, LeaseLostError, releaseLease, takeLease } from './commit.js';
import { collectGarbage } from '../pipeline/garbage.js';
import { recordFailed } from '../load/ledger/windows.js';
import {
  CONTROL_SCHEMA,
  QUEUE_SCHEMA,
  WINDOW_QUEUE,
  connect,
  controlLedger,
  oneAtATime,
  openCatalog,
  setupControlPlane,
  underSetupLock,
} from './control-plane.js';
import type { DistributedOptions } from './enqueue.js';
import { fetchWindow, type FetchResult, type RunContext, type SetupProblem } from './fragment.js';
import type { RunReport } from '../pipeline/report.js';
import { DEFAULT_QUEUE_SETTINGS, openQueue, windowJobId, type WindowJob } from './queue.js';
import { accountLease, SharedQuota } from './account.js';
import { closeEndedRuns, lockRuns } from './runs.js';
import { failAbandonedHolds, forgetWorker, heartbeat, HEARTBEAT_SECONDS, recordHold } from './liveness.js';
import { openStore } from './store.js';
import type { QueueState, WorkerMetrics } from '../observe/worker-metrics.js';
import { makeScratch } from '../pipeline/scratch.js';

export interface WorkerOptions extends DistributedOptions {
  /** Names this worker in the control plane (windows it fetched, the lease); default host-pid-random. */
  id?: string;
  /** Exit once nothing is queued, being fetched or waiting for a commit (for batch use and tests). */
  untilIdle?: boolean;
  /** How long an idle worker waits before asking the queue again. */
  pollMs?: number;
  /** Seconds the committer lease lasts without renewal: how long a dead committer holds up commits. */
  leaseSeconds?: number;
  /** Windows fetched at once (each on its own connections); the run's transport bounds requests in flight. */
  windowsAtOnce?: number;
  /** Rows fetched (by all workers) that make the lease holder commit while windows are still being fetched. */
  commitRows?: number;
  /** Seconds after which a fetched window is committed while windows are still being fetched. */
  commitSeconds?: number;
  /** Windows one commit takes at most (default COMMIT_WINDOWS); more fetched are the next commit's. */
  commitWindows?: number;
  /**
   * Commit only once nothing is left to fetch and nothing is in hand (`verify --repair`: its windows one snapshot);
   * commitRows and commitSeconds are then not looked at. With untilIdle.
   */
  commitWhenDone?: boolean;
  signal?: AbortSignal;
  log?: Logger;
  /**
   * The API account this worker's key belongs to (see account.ts): workers of one account take turns, workers
   * of different accounts fetch side by side. Default `default`: every worker shares one account.
   */
  account?: string;
  /** The clock of the daily quota (tests). */
  now?: () => Date;
  /** Counted as the worker goes (see WorkerMetrics); its queue gauges read the control plane. */
  metrics?: WorkerMetrics;
  /** Test seam: runs inside each commit transaction just before COMMIT. */
  beforeCommit?: () => Promise<void>;
  /** Rows after which a joined window stops and the rest is queued as a window of its own (default WINDOW_ROWS); tests make it small. */
  windowRows?: number;
  /** This machine's environment: the base URLs and API key a stored job leaves out (the CLI passes its own; default none: the worker reads no environment of its own). */
  env?: NodeJS.ProcessEnv;
}

export interface WorkerReport {
  worker: string;
  windowsFetched: number;
  /** Failed attempts (a window the queue offers again and that then succeeds counts here too). */
  windowsFailed: number;
  /** Windows whose last attempt failed here: failed for good (the next enqueue plans their blocks again, --retry-failed re-offers them). */
  windowsFailedForGood: number;
  /** Those windows and why, as a run report lists its failed windows. */
  errors: { run: string; window: string; error: string }[];
  /**
   * What became of the windows this worker took, in a single-machine run's words: `complete` (none failed for good),
   * `partial` (some did, others were fetched), `failed` (every one it tried did), `quota_reached` (none failed, and
   * the account's quota for today is spent: the rest waits for tomorrow). Set when the worker stops.
   */
  status: RunReport['status'];
  /** Every window this worker tried failed for the same kind of reason a person must fix (a refused key, nothing answering), and it fetched none. */
  setupProblem?: SetupProblem;
  windowsSkipped: number;
  windowsCommitted: number;
  rows: number;
  requests: number;
}

export const DEFAULT_LEASE_SECONDS = 60;
export const DEFAULT_COMMIT_ROWS = 200_000;
/** The longest a fetched window waits for its commit while workers keep fetching (the lake's freshness). */
export const DEFAULT_COMMIT_SECONDS = 60;
/**
 * How long a worker with nothing in hand lets fetched windows wait for the last windows of the queue, in flight on
 * other workers, before it commits without them: their own commit would follow at once, a second snapshot and a
 * second commit's fixed cost at the end of every run.
 */
export const LAST_WINDOWS_WAIT_SECONDS = 5;
/** Windows a worker fetches at once: a window of one or two pages leaves its account idle between requests otherwise. */
export const DEFAULT_WINDOWS_AT_ONCE = 4;

export function defaultWorkerId(): string {
  return `${os.hostname()}-${process.pid}-${randomBytes(2).toString('hex')}`;
}

export async function runWorker(opts: WorkerOptions): Promise<WorkerReport> {
  const log = opts.log ?? silentLogger;
  const settings = { ...DEFAULT_QUEUE_SETTINGS, ...opts.queue };
  const id = opts.id ?? defaultWorkerId();
  const leaseSeconds = opts.leaseSeconds ?? DEFAULT_LEASE_SECONDS;
  const account = opts.account ?? 'default';
  const now = opts.now ?? (() => new Date());
  const store = await openStore(opts.store);
  const report: WorkerReport = {
    worker: id,
    windowsFetched: 0,
    windowsFailed: 0,
    windowsFailedForGood: 0,
    errors: [],
    status: 'complete',
    windowsSkipped: 0,
    windowsCommitted: 0,
    rows: 0,
    requests: 0,
  };
  /** Failed attempts that were setup problems, and the others: a worker whose every attempt was one exits 2. */
  let setupFailures = 0;
  let otherFailures = 0;
  let firstSetupProblem: SetupProblem | undefined;
  const closers: (() => Promise<void> | void)[] = [() => store.close()];
  const client = await connect(opts.catalog).catch(async (e: unknown) => {
    await store.close();
    throw e;
  });
  closers.push(() => client.end());
  try {
    // Each step of the start named at debug level: a worker that never says it started shows where it waits.
    log.log('debug', 'worker.setup', `worker ${id}: setting up the control plane`, { worker: id });
    await setupControlPlane(client, store.dataPath);
    const cat = await openCatalog(opts.catalog);
    closers.push(() => cat.client.end());
    log.log('debug', 'worker.setup', `worker ${id}: starting the queue`, { worker: id });
    const boss = await underSetupLock(client, () => openQueue(opts.catalog, settings, true));
    closers.push(() => boss.stop({ graceful: false, close: true, wait: true }));
    log.log('debug', 'worker.setup', `worker ${id}: queue started`, { worker: id });
    const scratch = await makeScratch('worker');
    closers.push(() => rm(scratch, { recursive: true, force: true }));
    const engine: Engine = await openEngine({ tempDir: path.join(scratch, 'duckdb-tmp'), threads: 2 });
    closers.push(() => engine.close());
    // One fragment typed at a time on the engine (FetchDeps.typing); its two threads are all the speed there is.
    const typing = pLimit(1);
    // Leases (committer, account) on a connection of their own: renewals run beside the worker's transactions.
    const leases = oneAtATime(await connect(opts.catalog));
    closers.push(() => leases.end());
    closers.push(() => releaseLease(leases, id).catch(() => undefined));
    closers.push(() => releaseLease(leases, id, accountLease(account)).catch(() => undefined));
    // Alive until it stops: a worker killed stops beating, and its windows are offered again (liveness.ts).
    await heartbeat(leases, id);
    const beat = setInterval(() => void heartbeat(leases, id).catch(() => undefined), HEARTBEAT_SECONDS * 1000);
    closers.push(() => forgetWorker(leases, id).catch(() => undefined));
    closers.push(() => clearInterval(beat));
    const quotaClient = await connect(opts.catalog);
    closers.push(() => quotaClient.end());
    const runs = new Map<string, Promise<OpenRun>>();
    const opened: OpenRun[] = [];
    closers.push(async () => {
      for (const r of runs.values()) await (await r.catch(() => undefined))?.close();
    });
    const runContext = (runId: string) => {
      let ctx = runs.get(runId);
      if (!ctx) {
        ctx = openRun(leases, runId, opts, (job) =>
          job.source.dailyRequestQuota === undefined ? undefined : new SharedQuota(quotaClient, account, job.source.dailyRequestQuota, now),
        );
        ctx.then((c) => opened.push(c)).catch(() => undefined);
        runs.set(runId, ctx);
      }
      return ctx;
    };
    const quotaReachedToday = async () => opened.some((c) => c.quota?.reachedToday());
    log.log('info', 'worker.start', `worker ${id}: store ${store.location}`, { worker: id });

    /** Commits one batch if this worker holds (or takes) the committer lease; returns the windows committed. */
    const tryCommit = async (): Promise<number> => {
      const held = await takeLease(leases, id, leaseSeconds);
      opts.metrics?.leaseHeld(held);
      if (!held) return 0;
      // Renewed while a long commit runs, so that it is not taken away from a committer that is alive.
      const renew = setInterval(() => void takeLease(leases, id, leaseSeconds).catch(() => undefined), (leaseSeconds * 1000) / 3);
      try {
        const n = await commitFetched(
          { catalog: cat.catalog, engine, store, holder: id, leaseSeconds, log, beforeCommit: opts.beforeCommit },
          opts.commitRows ?? DEFAULT_COMMIT_ROWS,
          opts.commitWindows ?? COMMIT_WINDOWS,
        );
        report.windowsCommitted += n;
        opts.metrics?.commits(n);
        // As after a single machine's commit: its statements' results hold DuckDB memory until V8 collects them, and
        // a worker that only commits (the fetching is over) allocates too little for V8 to (docs/performance.md,
        // "Commits' results").
        if (n > 0) collectGarbage();
        await closeAbandoned(client);
        return n;
      } catch (error) {
        if (!(error instanceof LeaseLostError)) throw error;
        log.log('warn', 'commit.lease_lost', error.message);
        return 0;
      } finally {
        clearInterval(renew);
      }
    };

    /** The account this worker fetches with (see account.ts); false: another worker has it. */
    let holdsAccount = false;
    /** When the lease was last asked for (before the ask: the lease runs from a moment after it). */
    let accountAskedAt = -Infinity;
    const takeAccount = async (): Promise<boolean> => {
      const asked = Date.now();
      const held = await takeLease(leases, id, leaseSeconds, accountLease(account));
      if (held !== holdsAccount)
        log.log('info', held ? 'account.taken' : 'account.busy', `worker ${id}: account ${account} ${held ? 'taken' : 'held by another worker'}`);
      holdsAccount = held;
      accountAskedAt = asked;
      return held;
    };
    /**
     * Whether a slot may start a window: the lease is asked for again only when its last grant is a third of a lease
     * old (it stands for the other two thirds, and the renewal below keeps it younger than that). Asking before every
     * window cost a control-plane round trip per window and per idle poll of each slot.
     */
    const mayFetch = async (): Promise<boolean> => {
      if (holdsAccount && Date.now() - accountAskedAt < (leaseSeconds * 1000) / 3) return true;
      return takeAccount();
    };
    // Held for as long as this worker lives, however long its windows take: renewed in the background.
    const renewAccount = setInterval(
      () => {
        if (holdsAccount) void takeAccount().catch(() => undefined);
      },
      (leaseSeconds * 1000) / 3,
    );
    closers.push(() => clearInterval(renewAccount));

    let stopping = false;
    /** Slots between asking the queue and finishing a window (a slot waiting for work is not busy). */
    let busy = 0;
    let failure: Error | undefined;
    const pollMs = opts.pollMs ?? 1000;
    /**
     * When the queue last had nothing for this worker. Until a poll has passed, the other slots sleep instead of
     * asking too: an idle worker asks about once a poll, not once a poll per slot. A slot that gets a window clears
     * it, so the others ask at their next wake.
     */
    let queueEmptyAt = -Infinity;

    /** One window at a time, on a control-plane connection and a DuckDB connection of its own. */
    const slot = async (n: number): Promise<void> => {
      const own = await connect(opts.catalog);
      const duck = await engine.connect();
      try {
        while (!stopping) {
          if (Date.now() - queueEmptyAt < pollMs || (await quotaReachedToday()) || !(await mayFetch())) {
            await sleep(pollMs, opts.signal);
            continue;
          }
          busy++;
          let job: PgBoss.JobWithMetadata<WindowJob> | undefined;
          try {
            [job] = (await boss.fetch<WindowJob>(WINDOW_QUEUE, { batchSize: 1, includeMetadata: true })) as PgBoss.JobWithMetadata<WindowJob>[];
            queueEmptyAt = job ? -Infinity : Date.now();
            if (job) {
              await recordHold(own, job.id, id);
              await handle(job, own, duck, n);
            }
          } finally {
            busy--;
          }
          if (!job) await sleep(pollMs, opts.signal);
        }
      } finally {
        duck.closeSync();
        await own.end().catch(() => undefined);
      }
    };

    const handle = async (job: PgBoss.JobWithMetadata<WindowJob>, own: import('pg').Client, duck: import('@duckdb/node-api').DuckDBConnection, n: number) => {
      const ctx = await runContext(job.data.runId);
      const result: FetchResult = await fetchWindow(job, ctx, {
        client: own,
        boss,
        duck,
        store,
        settings,
        workerId: id,
        scratch: path.join(scratch, `slot-${n}`),
        log,
        typing,
      }).catch((e: Error) => ({ state: 'failed' as const, error: e.message }));
      if (result.state === 'failed' && ctx.quota?.reachedToday()) {
        // Not the window's fault: it waits for tomorrow's quota (UTC), without using up a retry.
        const tomorrow = nextUtcDay(now());
        await requeueAt(own, boss, job, tomorrow);
        log.log(
          'info',
          'window.quota',
          `${job.data.windowId}: the daily request quota of account ${account} is spent; queued again for ${tomorrow.toISOString()}`,
          {
            window: job.data.windowId,
            account,
          },
        );
        return;
      }
      if (result.state === 'failed') {
        report.windowsFailed++;
        if (result.setup) {
          setupFailures++;
          firstSetupProblem ??= result.setup;
        } else otherFailures++;
        opts.metrics?.window('failed', result.dataset, 0, result.requests, result.throttles);
        log.log('warn', 'window.failed', `${job.data.windowId}: ${result.error} (attempt ${job.retryCount + 1} of ${job.retryLimit + 1})`, {
          window: job.data.windowId,
          error: result.error,
        });
        if (job.retryCount < job.retryLimit) {
          await boss.fail(WINDOW_QUEUE, job.id, { error: result.error });
          return;
        }
        // Its last attempt: the window fails for good, and its run ends if this was its last window (else nothing
        // would close it: the run stayed open, and the next enqueue found nothing to do).
        report.windowsFailedForGood++;
        report.errors.push({ run: job.data.runId, window: job.data.windowId, error: result.error });
        await inTransaction(own, async () => {
          const execute = (text: string, values: string[][]) => own.query(text, values);
          await lockRuns(execute, [job.data.runId]);
          await recordFailed(controlLedger(own), [{ runId: job.data.runId, windowId: job.data.windowId }]);
          await boss.fail(WINDOW_QUEUE, job.id, { error: result.error }, { db: { executeSql: (text: string, values: unknown[]) => own.query(text, values) } });
          await closeEndedRuns(execute, [job.data.runId]);
        });
        return;
      }
      if (result.state === 'fetched') {
        report.windowsFetched++;
        report.rows += result.rows;
        report.requests += result.requests;
        opts.metrics?.window('fetched', result.dataset, result.rows, result.requests, result.throttles);
      } else {
        report.windowsSkipped++;
        opts.metrics?.window('skipped');
      }
      await boss.complete(WINDOW_QUEUE, job.id);
    };

    const slots = Array.from({ length: opts.windowsAtOnce ?? DEFAULT_WINDOWS_AT_ONCE }, (_, n) =>
      slot(n).catch((e: Error) => {
        // A slot that lost the control plane ends the worker (its supervisor restarts it); the queue re-offers.
        failure ??= e;
        stopping = true;
      }),
    );

    // The worker's own loop: commits (when enough is fetched, or when this worker has nothing in hand) and the
    // decision to stop.
    const idleLine = new IdleLine();
    let livenessCheckedAt = -Infinity;
    try {
      while (!stopping) {
        if (opts.signal?.aborted) break;
        if (Date.now() - livenessCheckedAt >= HEARTBEAT_SECONDS * 1000) {
          livenessCheckedAt = Date.now();
          const given = await failAbandonedHolds(client, boss);
          if (given > 0) log.log('warn', 'window.abandoned', `worker ${id}: ${given} windows held by a worker that stopped answering are offered again`);
        }
        const { rows: fetched, waitedSeconds } = await fetchedState(client);
        const due = opts.commitWhenDone
          ? // Only once no window is left to fetch (none due, or the quota spent) and none is in hand: one commit.
            busy === 0 && fetched > 0 && ((await quotaReachedToday()) || (await nothingDue(client)))
          : fetched >= (opts.commitRows ?? DEFAULT_COMMIT_ROWS) ||
            (fetched > 0 && waitedSeconds >= (opts.commitSeconds ?? DEFAULT_COMMIT_SECONDS)) ||
            (busy === 0 && fetched > 0 && !(waitedSeconds < LAST_WINDOWS_WAIT_SECONDS && (await lastWindowsInFlight(client)))) ||
            (busy === 0 && (await abandonedWindows(client)) > 0);
        // A batch committed: look again at once (more may be due) rather than after a poll.
        if (due && (await tryCommit()) > 0) continue;
        // Nothing this worker can do now: no window it may fetch (none due, or its account's quota is spent for
        // today), none in hand, and nothing waiting for a commit. A window another worker holds keeps it waiting.
        // (A window in hand is `active` in the queue: not due-free. A slot merely asking the queue is not work.)
        const nothingLeft = fetched === 0 && ((await quotaReachedToday()) || (await nothingDue(client)));
        if (idleLine.due(nothingLeft, workDone(report))) log.log('info', 'worker.idle', `worker ${id}: nothing to do now; waiting for work`, { ...report });
        if (opts.untilIdle && nothingLeft && busy === 0) break;
        await sleep(pollMs, opts.signal);
      }
    } finally {
      stopping = true;
      await Promise.all(slots);
    }
    if (failure) throw failure;
    report.status =
      report.windowsFailedForGood > 0
        ? report.windowsFetched > 0
          ? 'partial'
          : 'failed'
        : (await quotaReachedToday().catch(() => false))
          ? 'quota_reached'
          : 'complete';
    if (report.windowsFetched === 0 && setupFailures > 0 && otherFailures === 0) report.setupProblem = firstSetupProblem;
    log.log(
      report.windowsFailedForGood > 0 ? 'warn' : 'info',
      'worker.stop',
      `worker ${id}: ${report.windowsFetched} windows fetched, ${report.windowsCommitted} committed${report.windowsFailedForGood ? `, ${report.windowsFailedForGood} failed for good (chainlake enqueue --retry-failed offers them again)` : ''}`,
      { ...report },
    );
    return report;
  } finally {
    for (const close of closers.reverse()) await Promise.resolve(close()).catch(() => undefined);
  }
}

/** Windows this worker has dealt with in any way: what makes it idle anew once it runs out of work again. */
const workDone = (r: WorkerReport): number => r.windowsFetched + r.windowsFailed + r.windowsSkipped + r.windowsCommitted;

/**
 * When a worker says it is idle: each time it runs out of work, once. Work done since the last idle line counts
 * as much as a look that saw work going on: a small window can be fetched and committed between two looks of the
 * worker's loop, and a worker that only compared looks stayed silent after it (the CLI test waited for ever).
 */
export class IdleLine {
  private wasIdle = false;
  private doneAtLast = -1;

  due(nothingLeft: boolean, done: number): boolean {
    const due = nothingLeft && (!this.wasIdle || done !== this.doneAtLast);
    if (due) this.doneAtLast = done;
    this.wasIdle = nothingLeft;
    return due;
  }
}

/** The queue as the control plane has it, for the metrics' gauges. */
export async function queueState(client: Pick<import('pg').Client, 'query'>): Promise<QueueState> {
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

/** Rows fetched by every worker and not yet committed, and how long the oldest of them has waited. */
async function fetchedState(client: import('pg').Client): Promise<{ rows: number; waitedSeconds: number }> {
  const r = await client.query(
    `SELECT COALESCE(sum(rows_got), 0)::BIGINT AS n, count(*)::BIGINT AS w, COALESCE(EXTRACT(EPOCH FROM NOW() - min(updated_at)), 0)::FLOAT8 AS age
     FROM ${CONTROL_SCHEMA}.windows WHERE status = 'fetched'`,
  );
  // A fetched window with no row still waits for its commit (its watermark and its run's end).
  return { rows: Number(r.rows[0].n) + Number(r.rows[0].w), waitedSeconds: Number(r.rows[0].age) };
}

/**
 * The queue's last windows are being fetched: some in flight, none waiting to be taken (or to be retried soon). While
 * windows wait in the queue the worker commits what is fetched: workers sharing an account take turns, and a worker
 * whose account is busy would otherwise hold every commit until the queue runs dry.
 */
async function lastWindowsInFlight(client: import('pg').Client): Promise<boolean> {
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

async function abandonedWindows(client: import('pg').Client): Promise<number> {
  return Number((await client.query(`SELECT count(*)::BIGINT AS n ${ABANDONED}`)).rows[0].n);
}

/** Marks abandoned windows failed and ends the runs left with nothing to do (run by the lease holder). */
async function closeAbandoned(client: import('pg').Client): Promise<void> {
  const abandoned = (await client.query(`SELECT w.run_id, w.window_id ${ABANDONED}`)).rows;
  await recordFailed(
    controlLedger(client),
    abandoned.map((r) => ({ runId: String(r.run_id), windowId: String(r.window_id) })),
  );
  const open = (await client.query(`SELECT run_id FROM ${CONTROL_SCHEMA}.runs WHERE finished_at IS NULL`)).rows.map((r) => String(r.run_id));
  if (open.length > 0) await inTransaction(client, () => closeEndedRuns((text, values) => client.query(text, values), open));
}

/** Runs `work` in a transaction on `client`: committed when it resolves, rolled back when it throws. */
async function inTransaction<T>(client: import('pg').Client, work: () => Promise<T>): Promise<T> {
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
 * No window is due now or soon (queued, taken by a worker, or waiting to be retried), and no run is open but
 * for windows queued for a later day (a spent quota).
 */
async function nothingDue(client: import('pg').Client): Promise<boolean> {
  const due = await client.query(
    `SELECT count(*)::BIGINT AS n FROM ${QUEUE_SCHEMA}.job WHERE name = $1 AND state IN ('created', 'retry', 'active') AND start_after < NOW() + interval '5 minutes'`,
    [WINDOW_QUEUE],
  );
  return Number(due.rows[0].n) === 0;
}

/** The next 00:00 UTC after `now`. */
function nextUtcDay(now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1));
}

/** Ends a window's queue job and queues it again to start at `at` (a new job id: the old one stays completed). */
async function requeueAt(client: import('pg').Client, boss: PgBoss, job: PgBoss.JobWithMetadata<WindowJob>, at: Date): Promise<void> {
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

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
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

/** A run's job as its enqueuer stored it, parsed here: this machine's environment gives URLs and the API key. */
type OpenRun = RunContext & { quota?: SharedQuota; close(): Promise<void> };

async function openRun(
  client: Pick<import('pg').Client, 'query'>,
  runId: string,
  opts: WorkerOptions,
  quotaOf: (job: Job) => SharedQuota | undefined,
): Promise<OpenRun> {
  const row = (await client.query(`SELECT job_doc, job_file, ingested_at FROM ${CONTROL_SCHEMA}.runs WHERE run_id = $1`, [runId])).rows[0];
  if (!row) throw new Error(`run ${runId} is not in the control plane`);
  const job = parseJob(row.job_doc, String(row.job_file), opts.env ?? {});
  const quota = quotaOf(job);
  const source = await openSource(job.source, { simulator: opts.simulator, transport: opts.transport, quota });
  const ingestedAt = String(row.ingested_at);
  const transformers = new Map<string, RowTransformer>();
  return {
    runId,
    job,
    ingestedAt,
    clients: source.clients,
    pager: pagerOptionsOf(job.source, job.what.range.fixedChunks ? undefined : (opts.windowRows ?? WINDOW_ROWS)),
    transformers,
    transformerFor(name: string) {
      let t = transformers.get(name);
      if (!t) transformers.set(name, (t = new RowTransformer(getDataset(name), { network: job.what.network, snapshotDate: ingestedAt.slice(0, 10) })));
      return t;
    },
    quota,
    async close() {
      await quota?.release().catch(() => undefined);
      await source.close();
    },
  };
}
