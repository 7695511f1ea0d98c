import { Counter, Gauge, Registry } from 'prom-client';

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
  private readonly requests = new Counter({ name: 'chainlake_worker_requests_total', help: 'HTTP requests sent (every attempt).', registers: [this.registry] });
  private readonly throttles = new Counter({
    name: 'chainlake_worker_throttles_total',
    help: 'Responses that throttled this worker (HTTP 429 or a throttle envelope).',
    registers: [this.registry],
  });
  private readonly rows = new Counter({
    name: 'chainlake_worker_rows_fetched_total',
    help: 'Rows fetched and typed into fragments, by dataset.',
    labelNames: ['dataset'],
    registers: [this.registry],
  });
  private readonly windows = new Counter({
    name: 'chainlake_worker_windows_total',
    help: 'Windows this worker handled, by outcome (fetched, failed, skipped: done by another worker already).',
    labelNames: ['state'],
    registers: [this.registry],
  });
  private readonly committed = new Counter({
    name: 'chainlake_worker_windows_committed_total',
    help: 'Windows this worker committed while it held the committer lease.',
    registers: [this.registry],
  });
  private readonly committer = new Gauge({
    name: 'chainlake_worker_is_committer',
    help: '1 while this worker holds the committer lease.',
    registers: [this.registry],
  });
  private lastError: string | undefined;

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

  failed(error: string | undefined): void {
    this.lastError = error;
  }

  health(): { ok: boolean; problems: string[] } {
    return this.lastError ? { ok: false, problems: [this.lastError] } : { ok: true, problems: [] };
  }
}
