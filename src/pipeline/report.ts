import type { DecodeReport } from '../decode/lake.js';
import type { FailureReason } from '../extract/errors.js';
import type { ChainlakeErrorCode } from '../errors.js';
import { voidedText, type VoidedClaim } from '../load/ledger/voided.js';

/** What a run did, per dataset and in total: printed, stored in the catalog, written as JSON. */
export interface DatasetReport {
  dataset: string;
  windows: number;
  windowsFailed: number;
  /** Rows fetched and typed (each row as often as the API listed it, e.g. once per scoped address). */
  rows: number;
  /**
   * Rows of this run in the lake after its commits: `rows` less the rows of one natural key reduced to one
   * (a transaction listed for two scoped addresses lands once).
   */
  landed: number;
  rejects: number;
  requests: number;
  retries: number;
  throttles: number;
  files: number;
  bytes: number;
}

export interface RunReport {
  runId: string;
  job: string;
  network: string;
  /** `interrupted`: stopped by a signal; every window fetched is committed and the next run fetches the rest (`windowsLeft`).
   * `quota_reached`: the job's dailyRequestQuota stopped the run; what it committed stays, the next run resumes. */
  status: 'complete' | 'partial' | 'failed' | 'interrupted' | 'quota_reached';
  startedAt: string;
  finishedAt: string;
  durationMs: number;
  head: number | null;
  /** Windows not fetched because the lake already had them (incremental watermarks, resume). */
  windowsSkipped: number;
  /**
   * An interrupted run: the windows it did not commit as fetched (cut short in mid-fetch, never started,
   * failed), which the next run fetches.
   */
  windowsLeft?: number;
  /** The unfinished run this one resumed, if any. */
  resumeOf: string | null;
  /**
   * Windows earlier runs of the chain fetched and kept, their commit having failed for a lake-side reason, that this
   * run committed from their kept data (pipeline/kept.ts): counted in the datasets' windows and rows, and their
   * `requests` (what fetching them cost) not sent again.
   */
  fromKept?: { windows: number; rows: number; requests: number; runs: string[] };
  /**
   * Datasets whose table another DuckLake writer dropped and expired while the ledger counted their rows as loaded:
   * their claims were void, and the run fetched their whole range again (load/ledger/planning.ts voidClaims).
   */
  voided?: VoidedClaim[];
  datasets: DatasetReport[];
  /**
   * Requests the run sent outside any window: pinning the head at start (`GET /v1/blocks/latest`, one call
   * and its retries; none when the run resumes an earlier run's head), and an ABI its `decode` key takes from the
   * API. A distributed run's are its enqueue's (`runs.outside_windows`).
   */
  outsideWindows: RequestTally;
  /**
   * The datasets summed, plus `outsideWindows` in requests, retries and throttles: every request the run
   * sent, each attempt counted once.
   */
  totals: Omit<DatasetReport, 'dataset'>;
  /** Failed attempts of the whole run (windows and head pin) by reason, transient and terminal. */
  failures: Partial<Record<FailureReason, number>>;
  /**
   * Answers that said "nothing here" as the endpoint declares it may: an unverified contract's "not verified"
   * (a row with verified = false). Not failures: not in `failures`, no window failed for them.
   */
  notVerified?: number;
  /**
   * Failed windows with their error messages and, for an error chainlake raised on purpose, its stable code
   * (what a program matches on: `CHAINLAKE_STRICT_REJECTS`, `CHAINLAKE_API_ERROR`…; absent for an unforeseen error).
   */
  errors: { window: string; error: string; code?: ChainlakeErrorCode | undefined }[];
  /**
   * Set when not one request of the run reached the API: the addresses nothing answered at. A setup error a
   * person must fix (exit 2), not an outage the next run catches up on.
   */
  unreachable?: string[];
  unknownFields: Record<string, string[]>;
  lake: string;
  /** Under a dailyRequestQuota: the account it is kept for (never a key), the quota, today's use, whether it stopped the run. */
  quota?: { account: string; limit: number; usedToday: number; reached: boolean };
  /** Under a dailyRequestQuota: this run's requests per UTC day (the catalog's request_usage ledger). */
  requestUsage?: { account: string; days: Record<string, number> };
  /** Decoded-event datasets written after the export (the job's `decode` key). */
  decoded?: DecodeReport;
}

/** Requests, retries and throttles of a part of a run. */
export interface RequestTally {
  requests: number;
  retries: number;
  throttles: number;
}

export function emptyDatasetReport(dataset: string): DatasetReport {
  return { dataset, windows: 0, windowsFailed: 0, rows: 0, landed: 0, rejects: 0, requests: 0, retries: 0, throttles: 0, files: 0, bytes: 0 };
}

/** The datasets' figures summed; `outside` (requests sent outside any window) adds to the request counts. */
export function sumReports(reports: readonly DatasetReport[], outside?: RequestTally): Omit<DatasetReport, 'dataset'> {
  const t = emptyDatasetReport('');
  if (outside) {
    t.requests += outside.requests;
    t.retries += outside.retries;
    t.throttles += outside.throttles;
  }
  for (const r of reports) {
    t.windows += r.windows;
    t.windowsFailed += r.windowsFailed;
    t.rows += r.rows;
    t.landed += r.landed;
    t.rejects += r.rejects;
    t.requests += r.requests;
    t.retries += r.retries;
    t.throttles += r.throttles;
    t.files += r.files;
    t.bytes += r.bytes;
  }
  const { dataset: _unused, ...totals } = t;
  return totals;
}

const fmtInt = (n: number): string => n.toLocaleString('en-US');

/** What an interrupted run kept and what it left, in one sentence; undefined for a run that was not interrupted. */
export function interruptedSummary(r: RunReport): string | undefined {
  if (r.status !== 'interrupted' || r.windowsLeft === undefined) return undefined;
  const kept = r.totals.windows - r.totals.windowsFailed;
  const left = r.windowsLeft === 0 ? 'nothing was left to fetch' : `the next run fetches the ${fmtInt(r.windowsLeft)} left`;
  return `interrupted: committed ${fmtInt(kept)} fetched window${kept === 1 ? '' : 's'} (${fmtInt(r.totals.rows)} row${r.totals.rows === 1 ? '' : 's'}); ${left}`;
}

const fmtBytes = (n: number): string => (n >= 1 << 20 ? `${(n / (1 << 20)).toFixed(1)} MiB` : n >= 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${n} B`);

/**
 * Lays out a table in columns; wider than `width`, it folds: the columns after the first go into as many
 * tables as needed, each repeating the first column, so nothing wraps mid-row on an 80-column terminal.
 */
export function foldTable(rows: string[][], width: number): string[] {
  const n = rows[0]!.length;
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
  const groups: number[][] = [];
  let group: number[] = [];
  let used = widths[0]!;
  for (let i = 1; i < n; i++) {
    if (group.length > 0 && used + 2 + widths[i]! > width) {
      groups.push(group);
      group = [];
      used = widths[0]!;
    }
    group.push(i);
    used += 2 + widths[i]!;
  }
  groups.push(group);
  const out: string[] = [];
  for (const [g, cols] of groups.entries()) {
    if (g > 0) out.push('');
    for (const row of rows) out.push([row[0]!.padEnd(widths[0]!), ...cols.map((i) => row[i]!.padStart(widths[i]!))].join('  ').trimEnd());
  }
  return out;
}

/** The end-of-run table for people; folded to fit `width` columns. */
export function formatReport(r: RunReport, width = Infinity): string {
  const header = ['dataset', 'windows', 'failed', 'fetched', 'landed', 'rejects', 'requests', 'retries', 'throttles', 'files', 'size'];
  const line = (d: Omit<DatasetReport, 'dataset'> & { dataset: string }): string[] => [
    d.dataset,
    String(d.windows),
    String(d.windowsFailed),
    String(d.rows),
    String(d.landed),
    String(d.rejects),
    String(d.requests),
    String(d.retries),
    String(d.throttles),
    String(d.files),
    fmtBytes(d.bytes),
  ];
  const outside = r.outsideWindows && r.outsideWindows.requests > 0 ? [line({ ...emptyDatasetReport('(outside windows)'), ...r.outsideWindows })] : [];
  const rows = [header, ...r.datasets.map(line), ...outside, line({ dataset: 'total', ...r.totals })];
  const out = [
    `run ${r.runId} (${r.job}, ${r.network}${r.head !== null ? `, head ${r.head}` : ''}${r.resumeOf ? `, resuming ${r.resumeOf}` : ''}): ${r.status} in ${(r.durationMs / 1000).toFixed(1)} s${r.windowsSkipped ? ` (${r.windowsSkipped} windows already in the lake)` : ''}`,
    ...foldTable(rows, width),
    `lake: ${r.lake}`,
  ];
  for (const v of r.voided ?? []) out.push(`warning: ${voidedText(v, r.network)}`);
  const kept = interruptedSummary(r);
  if (kept) out.push(kept);
  if (r.totals.landed < r.totals.rows)
    out.push(
      `note: landed counts rows after de-duplication by natural key: ${r.totals.rows - r.totals.landed} fetched rows were already in the lake or fetched twice (an entry listed for two scopes lands once)`,
    );
  if (r.notVerified)
    out.push(
      `note: ${r.notVerified} answer${r.notVerified === 1 ? '' : 's'} said a contract is not verified: recorded as rows with verified = false, not as failures`,
    );
  for (const [ds, fields] of Object.entries(r.unknownFields))
    out.push(`note: ${ds} entries carry fields the schema does not know: ${fields.join(', ')} (kept in its extra column)`);
  for (const e of r.errors.slice(0, 10)) out.push(`failed: ${e.window}: ${e.error}`);
  if (r.errors.length > 10) out.push(`... and ${r.errors.length - 10} more failed windows (see the catalog's windows table)`);
  return out.join('\n');
}
