import { Counter, Gauge, Registry } from 'prom-client';
import type { RunReport } from '../pipeline/report.js';

/** A counter of `registry` with these labels (the gauge below likewise): one line per metric, not five. */
export function counter<L extends string>(registry: Registry, name: string, help: string, labelNames: readonly L[] = []): Counter<L> {
  return new Counter({ name, help, labelNames, registers: [registry] });
}

export function gauge<L extends string>(registry: Registry, name: string, help: string, labelNames: readonly L[] = []): Gauge<L> {
  return new Gauge({ name, help, labelNames, registers: [registry] });
}

/**
 * What a long-running chainlake process (`chainlake schedule`; the distributed worker later) tells Prometheus.
 * Every count comes from a run's own report (the figures it stores in the catalog), added once per run, so the
 * metrics and the lake never disagree. Labels are job names and dataset names: never a URL, key or path.
 */
export class RunMetrics {
  readonly registry = new Registry();
  private readonly runs = counter(this.registry, 'chainlake_runs_total', 'Runs finished, by job and final status (or exit code when no report was written).', [
    'job',
    'status',
  ]);
  private readonly requests = counter(this.registry, 'chainlake_requests_total', 'HTTP requests sent by runs (every attempt).', ['job']);
  private readonly retries = counter(this.registry, 'chainlake_retries_total', 'Requests retried by runs.', ['job']);
  private readonly throttles = counter(this.registry, 'chainlake_throttles_total', 'Responses that throttled a run (HTTP 429 or a throttle envelope).', [
    'job',
  ]);
  private readonly rowsFetched = counter(this.registry, 'chainlake_rows_fetched_total', 'Rows fetched and typed, by job and dataset.', ['job', 'dataset']);
  private readonly rowsLanded = counter(this.registry, 'chainlake_rows_landed_total', 'Rows of runs in the lake after their commits, by job and dataset.', [
    'job',
    'dataset',
  ]);
  private readonly rejects = counter(this.registry, 'chainlake_rejects_total', 'Rows that did not convert (kept in _rejects), by job and dataset.', [
    'job',
    'dataset',
  ]);
  private readonly windows = counter(this.registry, 'chainlake_windows_total', 'Windows fetched by runs, by job and outcome (done, failed).', ['job', 'state']);
  private readonly quotaUsed = gauge(
    this.registry,
    'chainlake_quota_used_requests',
    "Requests spent today (UTC) on the job's account, as of its last run (jobs with a dailyRequestQuota).",
    ['job'],
  );
  private readonly quotaLimit = gauge(this.registry, 'chainlake_quota_limit_requests', "The job's dailyRequestQuota.", ['job']);
  private readonly lastExit = gauge(this.registry, 'chainlake_last_run_exit_code', "Exit code of the job's last run.", ['job']);
  private readonly lastFinish = gauge(this.registry, 'chainlake_last_run_finished_timestamp_seconds', "When the job's last run finished (Unix time).", ['job']);
  private readonly lastSuccess = gauge(
    this.registry,
    'chainlake_last_success_timestamp_seconds',
    "When a run of the job last completed (Unix time): now minus this is the lake's lag behind the schedule.",
    ['job'],
  );
  private readonly running = gauge(this.registry, 'chainlake_runs_in_progress', 'Runs in progress, by job.', ['job']);
  private readonly nextRun = gauge(this.registry, 'chainlake_next_run_timestamp_seconds', "When the job's next run is due (Unix time).", ['job']);
  /** Per job: the last run's exit code and when, for /healthz. */
  private readonly last = new Map<string, { exitCode: number; at: Date; status: string }>();

  started(job: string): void {
    this.running.inc({ job });
  }

  scheduled(job: string, at: Date): void {
    this.nextRun.set({ job }, at.getTime() / 1000);
  }

  /** A run ended: its report (undefined when the run wrote none, e.g. a bad job file) and exit code. */
  finished(job: string, exitCode: number, at: Date, report: RunReport | undefined): void {
    this.running.dec({ job });
    const status = report?.status ?? `exit_${exitCode}`;
    this.runs.inc({ job, status });
    this.lastExit.set({ job }, exitCode);
    this.lastFinish.set({ job }, at.getTime() / 1000);
    if (report?.status === 'complete') this.lastSuccess.set({ job }, at.getTime() / 1000);
    this.last.set(job, { exitCode, at, status });
    if (!report) return;
    const t = report.totals;
    this.requests.inc({ job }, t.requests);
    this.retries.inc({ job }, t.retries);
    this.throttles.inc({ job }, t.throttles);
    this.windows.inc({ job, state: 'done' }, t.windows - t.windowsFailed);
    this.windows.inc({ job, state: 'failed' }, t.windowsFailed);
    for (const d of report.datasets) {
      this.rowsFetched.inc({ job, dataset: d.dataset }, d.rows);
      this.rowsLanded.inc({ job, dataset: d.dataset }, d.landed);
      this.rejects.inc({ job, dataset: d.dataset }, d.rejects);
    }
    if (report.quota) {
      this.quotaUsed.set({ job }, report.quota.usedToday);
      this.quotaLimit.set({ job }, report.quota.limit);
    }
  }

  /**
   * Healthy unless the last run of some job needs a person: it ended with an exit code other than complete (0),
   * quota spent (4) or lake locked by another run (75). A partial run (1) counts as unhealthy too: the next run
   * may catch up, but a probe that stays red says it did not.
   */
  health(): { ok: boolean; problems: string[] } {
    const problems: string[] = [];
    for (const [job, l] of this.last) {
      if (![0, 4, 75].includes(l.exitCode)) problems.push(`${job}: last run ${l.status} (exit ${l.exitCode}) at ${l.at.toISOString()}`);
    }
    return { ok: problems.length === 0, problems };
  }
}
