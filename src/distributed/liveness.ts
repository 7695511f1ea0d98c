/**
 * Workers' liveness. A worker killed while it holds windows leaves their queue jobs `active` until their expiry
 * (`enqueue --window-timeout`, by default a quarter of an hour: a window may take that long on a slow API). Each
 * worker therefore says it is alive every HEARTBEAT_SECONDS and records which queue job it holds; any worker that
 * finds a job held by a worker silent for DEAD_AFTER_SECONDS fails that attempt, and the queue offers the window
 * again (to any worker, as after an expiry: the attempt counts as one of its retries).
 */
import type pg from 'pg';
import type PgBoss from 'pg-boss';
import { CONTROL_SCHEMA, QUEUE_SCHEMA, WINDOW_QUEUE } from './control-plane.js';

export const HEARTBEAT_SECONDS = 10;
/** Several heartbeats missed: a worker busy with a long window still beats (a timer on its own connection). */
export const DEAD_AFTER_SECONDS = 45;

type Query = Pick<pg.Client, 'query'>;

export async function heartbeat(client: Query, worker: string): Promise<void> {
  await client.query(
    `INSERT INTO ${CONTROL_SCHEMA}.workers (worker, seen_at) VALUES ($1, NOW()) ON CONFLICT (worker) DO UPDATE SET seen_at = EXCLUDED.seen_at`,
    [worker],
  );
}

/** A clean stop: the worker's windows are ended or given back, nothing of it needs watching. */
export async function forgetWorker(client: Query, worker: string): Promise<void> {
  await client.query(`DELETE FROM ${CONTROL_SCHEMA}.holds WHERE worker = $1`, [worker]);
  await client.query(`DELETE FROM ${CONTROL_SCHEMA}.workers WHERE worker = $1`, [worker]);
}

/** Records that `worker` holds queue job `jobId` (this attempt of it: a retried job keeps its id). */
export async function recordHold(client: Query, jobId: string, worker: string): Promise<void> {
  await client.query(
    `INSERT INTO ${CONTROL_SCHEMA}.holds (job_id, worker, taken_at) VALUES ($1, $2, NOW())
     ON CONFLICT (job_id) DO UPDATE SET worker = EXCLUDED.worker, taken_at = EXCLUDED.taken_at`,
    [jobId, worker],
  );
}

/**
 * Fails the attempts of windows whose worker stopped answering; returns how many. A hold older than its job's
 * current attempt (`started_on`: the job was retried and taken again, and its new holder has not recorded itself
 * yet) is not the current holder's and is left alone.
 */
export async function failAbandonedHolds(client: Query, boss: PgBoss): Promise<number> {
  const r = await client.query(
    `SELECT j.id, h.worker FROM ${QUEUE_SCHEMA}.job j JOIN ${CONTROL_SCHEMA}.holds h ON h.job_id = j.id
     LEFT JOIN ${CONTROL_SCHEMA}.workers k ON k.worker = h.worker
     WHERE j.name = $1 AND j.state = 'active' AND h.taken_at >= j.started_on
       AND (k.seen_at IS NULL OR k.seen_at < NOW() - make_interval(secs => $2))`,
    [WINDOW_QUEUE, DEAD_AFTER_SECONDS],
  );
  for (const row of r.rows) {
    await boss.fail(WINDOW_QUEUE, String(row.id), { error: `worker ${String(row.worker)} stopped answering (no sign of life for ${DEAD_AFTER_SECONDS} s)` });
  }
  // Holds of attempts that are over (this one's, and windows ended normally) are of no further use.
  await client.query(
    `DELETE FROM ${CONTROL_SCHEMA}.holds h WHERE NOT EXISTS (SELECT 1 FROM ${QUEUE_SCHEMA}.job j WHERE j.name = $1 AND j.id = h.job_id AND j.state = 'active')`,
    [WINDOW_QUEUE],
  );
  return r.rows.length;
}
