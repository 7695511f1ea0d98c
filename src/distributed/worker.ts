/**
 * `chainlake worker`: takes queued windows one at a time, fetches each into a fragment on the store, and
 * between windows (or when the queue is empty) commits what is fetched if it can take the committer lease.
 * Any number run side by side on any machines; a worker killed at any point loses at most the window it held
 * (the queue offers it again once its timeout passes) and never leaves the lake half-committed.
 */
import { chainlakeCodeOf, type ChainlakeError } from '../errors.js';
import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { DuckDBConnection } from '@duckdb/node-api';
import pLimit from 'p-limit';
import type pg from 'pg';
import type PgBoss from 'pg-boss';
import { openEngine, type Engine } from '../load/engine.js';
import { silentLogger, type Logger } from '../pipeline/log.js';
import { COMMIT_WINDOWS, commitFetched } from './commit.js';
import { keepRenewed, releaseLease, takeLease } from './lease.js';
import { collectGarbage } from '../pipeline/garbage.js';
import { recordFailed } from '../load/ledger/windows.js';
import { WINDOW_QUEUE, connect, controlLedger, oneAtATime, openCatalog, setupControlPlane, underSetupLock } from './control-plane.js';
import type { DistributedOptions } from './enqueue.js';
import { fetchWindow, type FetchResult, type SetupProblem } from './fragment.js';
import type { RunReport } from '../pipeline/report.js';
import { DEFAULT_QUEUE_SETTINGS, openQueue, type QueueSettings, type WindowJob } from './queue.js';
import { accountLease, SharedQuota } from './account.js';
import { AccountHold } from './account-hold.js';
import { closeEndedRuns, lockRuns } from './runs.js';
import { failAbandonedHolds, forgetWorker, heartbeat, HEARTBEAT_SECONDS, recordHold } from './liveness.js';
import { openStore, type Store } from './store.js';
import type { WorkerMetrics } from '../observe/worker-metrics.js';
import { makeScratch } from '../load/scratch.js';
import { RunContexts } from './worker-runs.js';
import {
  abandonedWindows,
  closeAbandoned,
  fetchedState,
  inTransaction,
  lastWindowsInFlight,
  nextUtcDay,
  nothingDue,
  requeueAt,
  sleep,
  takeRunWindow,
} from './worker-queue.js';

export { queueState } from './worker-queue.js';

/** The account of a worker that names none: every such worker shares it. */
const DEFAULT_ACCOUNT = 'default';

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
  /**
   * Takes and commits only the windows of this run (`verify --repair`'s own run): other runs' windows stay queued or
   * fetched for the workers, and "nothing left" means nothing left of this run. Default: every run's windows.
   */
  run?: string;
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
  /** Test seam: runs once each commit's merges are written, before its catalog transaction. */
  merged?: () => Promise<void>;
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
  const worker = await Worker.open(opts);
  try {
    await worker.work();
    return await worker.finish();
  } finally {
    await worker.close();
  }
}

/** Failed attempts that were setup problems, and the others: a worker whose every attempt was one exits 2. */
interface FailureTally {
  setup: number;
  other: number;
  firstSetupProblem?: SetupProblem;
}

/** What a worker opened, closed in the reverse order by `Worker.close`. */
interface WorkerParts {
  store: Store;
  client: pg.Client;
  /** The DuckLake catalog's connection, opened at the first commit: a worker that never commits never opens it. */
  cat: () => Promise<Awaited<ReturnType<typeof openCatalog>>>;
  boss: PgBoss;
  scratch: string;
  engine: Engine;
  leases: ReturnType<typeof oneAtATime>;
  runs: RunContexts;
  account: AccountHold;
}

/**
 * A worker as a sequence of named steps: `open` (the control plane, queue, engine, leases, heartbeat), `work` (its
 * slots fetch windows while its own loop commits and decides when to stop), `finish` (what became of its windows)
 * and `close`.
 */
class Worker {
  readonly report: WorkerReport;
  private readonly failures: FailureTally = { setup: 0, other: 0 };
  private readonly log: Logger;
  private readonly settings: QueueSettings;
  private readonly leaseSeconds: number;
  private readonly pollMs: number;
  /** One fragment typed at a time on the engine (FetchDeps.typing); its two threads are all the speed there is. */
  private readonly typing = pLimit(1);
  private stopping = false;
  /** Slots between asking the queue and finishing a window (a slot waiting for work is not busy). */
  private busy = 0;
  private failure: Error | undefined;
  /**
   * When the queue last had nothing for this worker. Until a poll has passed, the other slots sleep instead of
   * asking too: an idle worker asks about once a poll, not once a poll per slot. A slot that gets a window clears
   * it, so the others ask at their next wake.
   */
  private queueEmptyAt = -Infinity;

  private constructor(
    private readonly opts: WorkerOptions,
    readonly id: string,
    private readonly parts: WorkerParts,
    private readonly closers: (() => Promise<void> | void)[],
  ) {
    this.log = opts.log ?? silentLogger;
    this.settings = { ...DEFAULT_QUEUE_SETTINGS, ...opts.queue };
    this.leaseSeconds = opts.leaseSeconds ?? DEFAULT_LEASE_SECONDS;
    this.pollMs = opts.pollMs ?? 1000;
    this.report = {
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
  }

  /** Sets a worker up; what it opened is closed again when a step fails. */
  static async open(opts: WorkerOptions): Promise<Worker> {
    const id = opts.id ?? defaultWorkerId();
    const closers: (() => Promise<void> | void)[] = [];
    try {
      const parts = await openParts(opts, id, closers);
      return new Worker(opts, id, parts, closers);
    } catch (e) {
      await closeAll(closers);
      throw e;
    }
  }

  async work(): Promise<void> {
    this.log.log('info', 'worker.start', `worker ${this.id}: store ${this.parts.store.location}`, { worker: this.id });
    const slots = Array.from({ length: this.opts.windowsAtOnce ?? DEFAULT_WINDOWS_AT_ONCE }, (_, n) =>
      this.slot(n).catch((e: Error) => {
        // A slot that lost the control plane ends the worker (its supervisor restarts it); the queue re-offers.
        this.failure ??= e;
        this.stopping = true;
      }),
    );
    try {
      await this.superviseLoop();
    } finally {
      this.stopping = true;
      await Promise.all(slots);
    }
    if (this.failure) throw this.failure;
  }

  /** What became of the windows this worker took, in a single-machine run's words; logged. */
  async finish(): Promise<WorkerReport> {
    const report = this.report;
    report.status =
      report.windowsFailedForGood > 0 ? (report.windowsFetched > 0 ? 'partial' : 'failed') : this.parts.runs.quotaReachedToday() ? 'quota_reached' : 'complete';
    if (report.windowsFetched === 0 && this.failures.setup > 0 && this.failures.other === 0) report.setupProblem = this.failures.firstSetupProblem;
    const failed = report.windowsFailedForGood ? `, ${report.windowsFailedForGood} failed for good (chainlake enqueue --retry-failed offers them again)` : '';
    this.log.log(
      report.windowsFailedForGood > 0 ? 'warn' : 'info',
      'worker.stop',
      `worker ${this.id}: ${report.windowsFetched} windows fetched, ${report.windowsCommitted} committed${failed}`,
      { ...report },
    );
    return report;
  }

  close(): Promise<void> {
    return closeAll(this.closers);
  }

  /** The worker's own loop: commits (when enough is fetched, or when this worker has nothing in hand) and the decision to stop. */
  private async superviseLoop(): Promise<void> {
    const { client, boss, runs } = this.parts;
    const idleLine = new IdleLine();
    let livenessCheckedAt = -Infinity;
    while (!this.stopping) {
      if (this.opts.signal?.aborted) break;
      if (Date.now() - livenessCheckedAt >= HEARTBEAT_SECONDS * 1000) {
        livenessCheckedAt = Date.now();
        const given = await failAbandonedHolds(client, boss);
        if (given > 0)
          this.log.log('warn', 'window.abandoned', `worker ${this.id}: ${given} windows held by a worker that stopped answering are offered again`);
      }
      const { rows: fetched, waitedSeconds } = await fetchedState(client, this.opts.run);
      // A batch committed: look again at once (more may be due) rather than after a poll.
      if ((await this.commitDue(fetched, waitedSeconds)) && (await this.tryCommit()) > 0) continue;
      // Nothing this worker can do now: no window it may fetch (none due, or its account's quota is spent for
      // today), none in hand, and nothing waiting for a commit. A window another worker holds keeps it waiting.
      // (A window in hand is `active` in the queue: not due-free. A slot merely asking the queue is not work.)
      const nothingLeft = fetched === 0 && (runs.quotaReachedToday() || (await nothingDue(client, this.opts.run)));
      if (idleLine.due(nothingLeft, workDone(this.report)))
        this.log.log('info', 'worker.idle', `worker ${this.id}: nothing to do now; waiting for work`, { ...this.report });
      if (this.opts.untilIdle && nothingLeft && this.busy === 0) break;
      await sleep(this.pollMs, this.opts.signal);
    }
  }

  /** Whether what is fetched should be committed now: enough rows, waited long enough, or nothing else to wait for. */
  private async commitDue(fetched: number, waitedSeconds: number): Promise<boolean> {
    const { client } = this.parts;
    // Only once no window is left to fetch (none due, or the quota spent) and none is in hand: one commit.
    if (this.opts.commitWhenDone) return this.busy === 0 && fetched > 0 && (this.parts.runs.quotaReachedToday() || (await nothingDue(client, this.opts.run)));
    return (
      fetched >= (this.opts.commitRows ?? DEFAULT_COMMIT_ROWS) ||
      (fetched > 0 && waitedSeconds >= (this.opts.commitSeconds ?? DEFAULT_COMMIT_SECONDS)) ||
      (this.busy === 0 && fetched > 0 && !(waitedSeconds < LAST_WINDOWS_WAIT_SECONDS && (await lastWindowsInFlight(client)))) ||
      (this.busy === 0 && (await abandonedWindows(client)) > 0)
    );
  }

  /** Commits one batch if this worker holds (or takes) the committer lease; returns the windows committed. */
  private async tryCommit(): Promise<number> {
    const { leases, engine, store, client } = this.parts;
    const held = await takeLease(leases, this.id, this.leaseSeconds);
    this.opts.metrics?.leaseHeld(held);
    if (!held) return 0;
    const cat = await this.parts.cat();
    // Renewed while a long commit runs, so that it is not taken away from a committer that is alive; never taken
    // back: a committer that stalled past its lease while another committed must not commit what it read.
    const stopRenewing = keepRenewed(leases, this.id, this.leaseSeconds);
    try {
      const n = await commitFetched(
        {
          catalog: cat.catalog,
          engine,
          store,
          holder: this.id,
          leaseSeconds: this.leaseSeconds,
          log: this.log,
          beforeCommit: this.opts.beforeCommit,
          merged: this.opts.merged,
        },
        this.opts.commitRows ?? DEFAULT_COMMIT_ROWS,
        this.opts.commitWindows ?? COMMIT_WINDOWS,
        // A worker of one run commits that run's windows only: another job's fetched beside them are its workers'.
        this.opts.run,
      );
      this.report.windowsCommitted += n;
      this.opts.metrics?.commits(n);
      // As after a single machine's commit: its statements' results hold DuckDB memory until V8 collects them, and
      // a worker that only commits (the fetching is over) allocates too little for V8 to (docs/performance.md,
      // "Commits' results").
      if (n > 0) collectGarbage();
      await closeAbandoned(client);
      return n;
    } catch (error) {
      if (chainlakeCodeOf(error) !== 'CHAINLAKE_LEASE_LOST') throw error;
      this.log.log('warn', 'commit.lease_lost', (error as Error).message);
      return 0;
    } finally {
      stopRenewing();
    }
  }

  /**
   * One window at a time, on a control-plane connection and a DuckDB connection of its own, opened when the slot
   * first needs them: a slot that never gets a window (an idle worker, a run of fewer windows than slots) opens none.
   */
  private async slot(n: number): Promise<void> {
    const conns: SlotConnections = { opened: undefined };
    try {
      while (!this.stopping) {
        if (Date.now() - this.queueEmptyAt < this.pollMs || this.parts.runs.quotaReachedToday() || !(await this.parts.account.mayFetch())) {
          await sleep(this.pollMs, this.opts.signal);
          continue;
        }
        if (!(await this.takeWindow(conns, n))) await sleep(this.pollMs, this.opts.signal);
      }
    } finally {
      const opened = await conns.opened?.catch(() => undefined);
      opened?.duck.closeSync();
      await opened?.own.end().catch(() => undefined);
    }
  }

  /** The slot's connections, opened on the first call. */
  private slotConnections(conns: SlotConnections): Promise<{ own: pg.Client; duck: DuckDBConnection }> {
    conns.opened ??= (async () => {
      const own = await connect(this.opts.catalog);
      try {
        return { own, duck: await this.parts.engine.connect() };
      } catch (e) {
        await own.end().catch(() => undefined);
        throw e;
      }
    })();
    return conns.opened;
  }

  /** Asks the queue for a window and works it; false when the queue had none. */
  private async takeWindow(conns: SlotConnections, n: number): Promise<boolean> {
    this.busy++;
    try {
      const job =
        this.opts.run === undefined
          ? ((await this.parts.boss.fetch<WindowJob>(WINDOW_QUEUE, { batchSize: 1, includeMetadata: true })) as PgBoss.JobWithMetadata<WindowJob>[])[0]
          : await takeRunWindow((await this.slotConnections(conns)).own, this.opts.run);
      this.queueEmptyAt = job ? -Infinity : Date.now();
      if (!job) return false;
      const { own, duck } = await this.slotConnections(conns);
      await recordHold(own, job.id, this.id);
      await this.handle(job, own, duck, n);
      return true;
    } finally {
      this.busy--;
    }
  }

  /** Fetches a window into a fragment, then ends its queue job by what became of it. */
  private async handle(job: PgBoss.JobWithMetadata<WindowJob>, own: pg.Client, duck: DuckDBConnection, n: number): Promise<void> {
    const { boss, store, scratch, runs } = this.parts;
    const ctx = await runs.get(job.data.runId).catch((e: unknown) => {
      // A lost control plane ends the worker (its slot's catch); a run that cannot be opened here (its row gone, its
      // job invalid on this machine) fails its windows, each naming why, and the worker goes on with the others.
      if (chainlakeCodeOf(e) === undefined) throw e;
      return e as ChainlakeError;
    });
    if (ctx instanceof Error) return this.failed(job, own, { state: 'failed', error: ctx.message, setup: { problem: ctx.message, hint: ctx.hint } });
    const result: FetchResult = await fetchWindow(job, ctx, {
      client: own,
      boss,
      duck,
      store,
      settings: this.settings,
      workerId: this.id,
      scratch: path.join(scratch, `slot-${n}`),
      log: this.log,
      typing: this.typing,
    }).catch((e: Error) => ({ state: 'failed' as const, error: e.message }));
    if (result.state === 'failed' && ctx.quota?.reachedToday()) return this.putOff(job, own);
    if (result.state === 'failed') return this.failed(job, own, result);
    if (result.state === 'fetched') {
      this.report.windowsFetched++;
      this.report.rows += result.rows;
      this.report.requests += result.requests;
      this.opts.metrics?.window('fetched', result.dataset, result.rows, result.requests, result.throttles);
    } else {
      this.report.windowsSkipped++;
      this.opts.metrics?.window('skipped');
    }
    await boss.complete(WINDOW_QUEUE, job.id);
  }

  /** Not the window's fault: it waits for tomorrow's quota (UTC), without using up a retry. */
  private async putOff(job: PgBoss.JobWithMetadata<WindowJob>, own: pg.Client): Promise<void> {
    const account = this.opts.account ?? DEFAULT_ACCOUNT;
    const tomorrow = nextUtcDay((this.opts.now ?? (() => new Date()))());
    await requeueAt(own, this.parts.boss, job, tomorrow);
    this.log.log(
      'info',
      'window.quota',
      `${job.data.windowId}: the daily request quota of account ${account} is spent; queued again for ${tomorrow.toISOString()}`,
      { window: job.data.windowId, account },
    );
  }

  /** A failed attempt: offered again while retries are left; on its last, the window fails for good. */
  private async failed(job: PgBoss.JobWithMetadata<WindowJob>, own: pg.Client, result: Extract<FetchResult, { state: 'failed' }>): Promise<void> {
    const { boss } = this.parts;
    this.report.windowsFailed++;
    if (result.setup) {
      this.failures.setup++;
      this.failures.firstSetupProblem ??= result.setup;
    } else this.failures.other++;
    this.opts.metrics?.window('failed', result.dataset, 0, result.requests, result.throttles);
    this.log.log('warn', 'window.failed', `${job.data.windowId}: ${result.error} (attempt ${job.retryCount + 1} of ${job.retryLimit + 1})`, {
      window: job.data.windowId,
      error: result.error,
    });
    if (job.retryCount < job.retryLimit) {
      await boss.fail(WINDOW_QUEUE, job.id, { error: result.error });
      return;
    }
    // Its last attempt: the window fails for good, and its run ends if this was its last window (else nothing
    // would close it: the run stayed open, and the next enqueue found nothing to do).
    this.report.windowsFailedForGood++;
    this.report.errors.push({ run: job.data.runId, window: job.data.windowId, error: result.error });
    await inTransaction(own, async () => {
      const execute = (text: string, values: string[][]) => own.query(text, values);
      await lockRuns(execute, [job.data.runId]);
      await recordFailed(controlLedger(own), [{ runId: job.data.runId, windowId: job.data.windowId }]);
      await boss.fail(WINDOW_QUEUE, job.id, { error: result.error }, { db: { executeSql: (text: string, values: unknown[]) => own.query(text, values) } });
      await closeEndedRuns(execute, [job.data.runId]);
    });
  }
}

/** The worker's setup, each step named at debug level: a worker that never says it started shows where it waits. */
async function openParts(opts: WorkerOptions, id: string, closers: (() => Promise<void> | void)[]): Promise<WorkerParts> {
  const log = opts.log ?? silentLogger;
  const settings = { ...DEFAULT_QUEUE_SETTINGS, ...opts.queue };
  const leaseSeconds = opts.leaseSeconds ?? DEFAULT_LEASE_SECONDS;
  const account = opts.account ?? DEFAULT_ACCOUNT;
  const now = opts.now ?? (() => new Date());
  const store = await openStore(opts.store, opts.storeConnection);
  closers.push(() => store.close());
  const client = await connect(opts.catalog);
  closers.push(() => client.end());
  log.log('debug', 'worker.setup', `worker ${id}: setting up the control plane`, { worker: id });
  await setupControlPlane(client, store.dataPath);
  const cat = once(() => openCatalog(opts.catalog));
  closers.push(async () => (await cat.opened())?.client.end());
  log.log('debug', 'worker.setup', `worker ${id}: starting the queue`, { worker: id });
  const boss = await underSetupLock(client, () => openQueue(opts.catalog, settings, true));
  closers.push(() => boss.stop({ graceful: false, close: true, wait: true }));
  log.log('debug', 'worker.setup', `worker ${id}: queue started`, { worker: id });
  const scratch = await makeScratch('worker');
  closers.push(() => rm(scratch, { recursive: true, force: true }));
  const engine: Engine = await openEngine({ tempDir: path.join(scratch, 'duckdb-tmp'), threads: 2 });
  closers.push(() => engine.close());
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
  // The shared daily quota's connection, opened by the first run that has a quota.
  // Its closer is in place before the runs' (closed first, last in): a run's quota gives back what it reserved and
  // did not spend on this connection, so it must still be open then.
  const quotaClient = once(() => connect(opts.catalog));
  closers.push(async () => (await quotaClient.opened())?.end());
  const runs = new RunContexts(leases, opts, (job) =>
    job.source.dailyRequestQuota === undefined ? undefined : new SharedQuota(onConnection(quotaClient), account, job.source.dailyRequestQuota, now),
  );
  closers.push(() => runs.close());
  const hold = new AccountHold(leases, id, account, leaseSeconds, log);
  closers.push(() => hold.stop());
  return { store, client, cat, boss, scratch, engine, leases, runs, account: hold };
}

/** A slot's connections, once opened. */
interface SlotConnections {
  opened: Promise<{ own: pg.Client; duck: DuckDBConnection }> | undefined;
}

/**
 * `open` called at the first call only; a failed opening is tried again at the next call. `opened()`: what it opened,
 * once any opening in flight has ended (undefined: never opened, or failed), for its closer.
 */
function once<T>(open: () => Promise<T>): (() => Promise<T>) & { opened(): Promise<T | undefined> } {
  let opening: Promise<T> | undefined;
  const get = () =>
    (opening ??= open().catch((e: unknown) => {
      opening = undefined;
      throw e;
    }));
  return Object.assign(get, { opened: async () => (opening ? await opening.catch(() => undefined) : undefined) });
}

/** Statements on the connection `opened` gives, opened at the first statement. */
function onConnection(opened: () => Promise<pg.Client>): Pick<pg.Client, 'query'> {
  const query = async (text: string, values?: unknown[]) => (await opened()).query(text, values);
  return { query: query as unknown as pg.Client['query'] };
}

/** Runs `closers` last first; a closer that fails does not keep the others from running. */
async function closeAll(closers: (() => Promise<void> | void)[]): Promise<void> {
  for (const close of closers.splice(0).reverse()) await Promise.resolve(close()).catch(() => undefined);
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
