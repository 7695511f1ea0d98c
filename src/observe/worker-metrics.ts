import { Gauge, Registry } from 'prom-client';
import { counter, gauge } from './metrics.js';

/** What the control plane says of the whole queue, read when Prometheus scrapes. */
export interface QueueState {
  queued: number;
  active: number;
  fetched: number;
  failed: number;
  /** Seconds the oldest fetched window has waited for its commit (0 when none waits). */
  commitLagSeconds: number;
  /** Requests spent (reserved) today, UTC, per account. */
  quotaUsedToday: { account: string; requests: number }[];
}

/**
 * A distributed worker's metrics: its own requests, throttles, rows and windows (counted as it works), and the
 * queue as the control plane has it (read at each scrape). Labels are dataset names and states, never a URL.
 */
export class WorkerMetrics {
  readonly registry = new Registry();
  private readonly requests = counter(this.registry, 'chainlake_worker_requests_total', 'HTTP requests sent (every attempt).');
  private readonly throttles = counter(
    this.registry,
    'chainlake_worker_throttles_total',
    'Responses that throttled this worker (HTTP 429 or a throttle envelope).',
  );
  private readonly rows = counter(this.registry, 'chainlake_worker_rows_fetched_total', 'Rows fetched and typed into fragments, by dataset.', ['dataset']);
  private readonly windows = counter(
    this.registry,
    'chainlake_worker_windows_total',
    'Windows this worker handled, by outcome (fetched, failed, skipped: done by another worker already).',
    ['state'],
  );
  private readonly committed = counter(
    this.registry,
    'chainlake_worker_windows_committed_total',
    'Windows this worker committed while it held the committer lease.',
  );
  private readonly committer = gauge(this.registry, 'chainlake_worker_is_committer', '1 while this worker holds the committer lease.');

  constructor(queueState?: () => Promise<QueueState>) {
    if (!queueState) return;
    const registry = this.registry;
    let pending: Promise<QueueState> | undefined;
    // One control-plane read per scrape, shared by the gauges below.
    const read = () => (pending ??= queueState().finally(() => setTimeout(() => (pending = undefined), 0)));
    const queueGauge = (name: string, help: string, pick: (s: QueueState) => number) =>
      new Gauge({
        name,
        help,
        registers: [registry],
        async collect() {
          this.set(pick(await read()));
        },
      });
    queueGauge('chainlake_windows_queued', 'Windows waiting in the queue (all workers).', (s) => s.queued);
    queueGauge('chainlake_windows_leased', 'Windows taken by a worker and being fetched (all workers).', (s) => s.active);
    queueGauge('chainlake_windows_fetched', 'Windows fetched and waiting for the committer (all workers).', (s) => s.fetched);
    queueGauge('chainlake_windows_failed', 'Windows that failed for good in open runs (all workers).', (s) => s.failed);
    queueGauge('chainlake_commit_lag_seconds', 'How long the oldest fetched window has waited for its commit.', (s) => s.commitLagSeconds);
    new Gauge({
      name: 'chainlake_quota_used_requests',
      help: 'Requests spent today (UTC) per account, as the control plane counts them (jobs with a dailyRequestQuota).',
      labelNames: ['account'],
      registers: [registry],
      async collect() {
        this.reset();
        for (const u of (await read()).quotaUsedToday) this.set({ account: u.account }, u.requests);
      },
    });
  }

  window(state: 'fetched' | 'failed' | 'skipped', dataset?: string, rows = 0, requests = 0, throttles = 0): void {
    this.windows.inc({ state });
    if (dataset && rows) this.rows.inc({ dataset }, rows);
    if (requests) this.requests.inc(requests);
    if (throttles) this.throttles.inc(throttles);
  }

  commits(windows: number): void {
    if (windows) this.committed.inc(windows);
  }

  leaseHeld(held: boolean): void {
    this.committer.set(held ? 1 : 0);
  }

  /** A worker that loses the control plane exits (its supervisor restarts it): while it serves, it is healthy. */
  health(): { ok: boolean; problems: string[] } {
    return { ok: true, problems: [] };
  }
}
