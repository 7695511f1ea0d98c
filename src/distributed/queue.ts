/**
 * The work queue: pg-boss 10 in the control plane's database. Chosen over graphile-worker because it runs on
 * Node 20 with the `pg` driver we already use, keeps its jobs in plain tables beside the catalog (so a window
 * is enqueued in the same transaction that records it), takes a caller's job id (deterministic ids make
 * enqueueing twice add nothing: its insert is ON CONFLICT DO NOTHING), and re-offers a job whose worker died
 * once the job's expiry passes (its supervisor), up to a retry limit.
 */
import { createHash } from 'node:crypto';
import PgBoss from 'pg-boss';
import type pg from 'pg';
import { QUEUE_SCHEMA, WINDOW_QUEUE } from './control-plane.js';

export interface QueueSettings {
  /** Seconds a window may stay taken before another worker may take it (its worker is presumed dead). */
  windowTimeoutSeconds: number;
  /** How often this process's supervisor expires abandoned windows. */
  superviseSeconds: number;
  /** Times a window is offered again after a failure or an expiry. */
  retryLimit: number;
}

export const DEFAULT_QUEUE_SETTINGS: QueueSettings = { windowTimeoutSeconds: 15 * 60, superviseSeconds: 30, retryLimit: 5 };

export interface WindowJob {
  runId: string;
  windowId: string;
}

/** The pg-boss job id of a window of a run: the same on every machine and every enqueue. */
export function windowJobId(runId: string, windowId: string): string {
  const hex = createHash('sha256').update(`${runId}\n${windowId}`).digest('hex');
  // Shaped as a version-4 UUID (pg-boss stores ids as uuid).
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-${((parseInt(hex[16]!, 16) & 3) | 8).toString(16)}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

/**
 * The id of a window's queue job when the window is offered again after its job ended (failed for good, or gone):
 * derived from the job it replaces, so two enqueues offering the same window at once make the same job once.
 */
export function againJobId(runId: string, windowId: string, previousJobId: string): string {
  return windowJobId(runId, `${windowId}#again:${previousJobId}`);
}

/** Starts pg-boss on the control plane (creating its schema the first time) and the window queue. */
export async function openQueue(url: string, settings: QueueSettings, supervise: boolean): Promise<PgBoss> {
  const boss = new PgBoss({
    connectionString: url,
    schema: QUEUE_SCHEMA,
    application_name: 'chainlake-queue',
    max: 2,
    supervise,
    schedule: false,
    maintenanceIntervalSeconds: settings.superviseSeconds,
  });
  // pg-boss reports its own connection trouble as events; the calls that need the database fail on their own.
  boss.on('error', () => undefined);
  await boss.start();
  await boss.createQueue(WINDOW_QUEUE, {
    name: WINDOW_QUEUE,
    policy: 'standard',
    retryLimit: settings.retryLimit,
    retryDelay: 1,
    expireInSeconds: settings.windowTimeoutSeconds,
  });
  return boss;
}

/** A window to queue, with the id of its queue job when it is not the window's first (see againJobId). */
export interface QueuedWindow extends WindowJob {
  jobId?: string;
}

/** How a window's job is queued: its deterministic id, its retries and its timeout. */
const jobOptions = (job: QueuedWindow, settings: QueueSettings) => ({
  id: job.jobId ?? windowJobId(job.runId, job.windowId),
  retryLimit: settings.retryLimit,
  retryDelay: 1,
  expireInSeconds: settings.windowTimeoutSeconds,
});

/** pg-boss statements on `client`, inside the caller's transaction. */
const on = (client: pg.Client) => ({ executeSql: (text: string, values: unknown[]) => client.query(text, values) });

/** Enqueues a window on `client` (inside the caller's transaction); a window already enqueued is left as it is. */
export async function sendWindow(boss: PgBoss, client: pg.Client, job: WindowJob, settings: QueueSettings): Promise<boolean> {
  const id = await boss.send(WINDOW_QUEUE, job, { ...jobOptions(job, settings), db: on(client) });
  return id !== null;
}

/** Enqueues windows in one statement on `client` (inside the caller's transaction); one already enqueued is left as it is. */
export async function sendWindows(boss: PgBoss, client: pg.Client, jobs: readonly QueuedWindow[], settings: QueueSettings): Promise<void> {
  if (jobs.length === 0) return;
  await boss.insert(
    jobs.map((job) => ({ name: WINDOW_QUEUE, data: { runId: job.runId, windowId: job.windowId } satisfies WindowJob, ...jobOptions(job, settings) })),
    { db: on(client) },
  );
}
