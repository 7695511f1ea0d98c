/**
 * The window state machine of the one ledger (schema.ts `windows.status`), for both modes and both catalog
 * databases: every change of a window's state goes through this module, as one SQL text over a `CatalogDb`.
 *
 *   queued ──> fetched ──> committed
 *     │  ^        │    └───> provisional ──> committed
 *     v  │        v               │
 *   failed ───────┘ (re-offered: failed -> queued; provisional -> queued: fetched again;
 *                    committed | provisional -> queued: voided, its rows gone with a table another writer dropped)
 *
 * A distributed window is planned `queued`, fetched into a fragment by a worker (`fetched`), committed by the
 * committer (`committed`, or `provisional` when it reaches into the unfinal zone: finality) or given up (`failed`); a failed window is offered again (`queued`). A single-machine run
 * fetches and commits in one process and records its windows when they end (`committed`, `provisional` or `failed`);
 * a window it fetched and could not commit for a lake-side reason (another DuckLake writer kept committing) is recorded
 * `fetched`, its staged data kept beside the lake (pipeline/kept.ts), and the next run of the job commits it
 * (`committed`, `provisional`) or, its data gone or damaged or the run not resuming it, gives it up (`failed`: it is
 * fetched again).
 */
import type { CatalogDb, CatalogValue } from '../../ducklake/catalog-db.js';
import { ident } from '../../ducklake/ddl.js';
import { ChainlakeError } from '../../errors.js';
import { ledgerTableName } from './schema.js';

/** Every state a window can be in. A new state is added here and in TRANSITIONS. */
export const WINDOW_STATES = ['queued', 'fetched', 'committed', 'provisional', 'failed'] as const;
export type WindowState = (typeof WINDOW_STATES)[number];

/**
 * The allowed transitions, from each state. `queued -> queued` is a queued window offered again with a new queue
 * job (its worker died, its job ended). A `provisional` window is committed but may still change (finality): it may
 * be confirmed (`committed`) or offered again to be fetched again (`queued`). A `committed` window leaves its state
 * only when its rows left the lake without chainlake: another DuckLake writer dropped the table (requeueVoided).
 */
export const TRANSITIONS: Readonly<Record<WindowState, readonly WindowState[]>> = {
  queued: ['queued', 'fetched', 'failed'],
  fetched: ['committed', 'provisional', 'failed'],
  committed: ['queued'],
  provisional: ['committed', 'queued'],
  failed: ['queued'],
};

/**
 * The states a window's row may be written in: planned (distributed), or ended (a single-machine run records it then).
 * A single-machine run also writes `fetched` rows, with their spec: the windows it kept (recordEnded).
 */
export const FIRST_STATES: readonly WindowState[] = ['queued', 'committed', 'provisional', 'failed'];

/** Where the ledger is: its catalog database and, in PostgreSQL, the schema of its tables. */
export interface Ledger {
  readonly db: CatalogDb;
  readonly schema?: string;
}

export interface WindowKey {
  runId: string;
  windowId: string;
}

const table = (l: Ledger): string => ledgerTableName(l.schema, 'windows');

/** Thrown for a transition the state machine does not have (a program error, or a window changed meanwhile by hand). */
export class WindowTransitionError extends ChainlakeError {
  /** `moved`: the states the refused move takes to `to` (a transition of the table, but not of this move). */
  constructor(key: WindowKey, from: string | undefined, to: WindowState, moved?: readonly WindowState[]) {
    super(
      from === undefined
        ? `window ${key.windowId} of run ${key.runId} is not in the ledger: it cannot become ${to}`
        : moved && (TRANSITIONS[from as WindowState] ?? []).includes(to)
          ? `window ${key.windowId} of run ${key.runId} is ${from}: this move takes only ${moved.join(' or ')} windows to ${to}`
          : `window ${key.windowId} of run ${key.runId} is ${from}: ${from} -> ${to} is not a transition of a window (allowed from ${from}: ${
              (TRANSITIONS[from as WindowState] ?? []).join(', ') || 'none'
            })`,
      {
        hint: 'a committed window is final unless its table is dropped; a failed window is offered again with `chainlake enqueue --retry-failed` (distributed) or the next run (one machine)',
      },
    );
  }
}

function checkEdge(key: WindowKey, from: WindowState, to: WindowState): void {
  if (!TRANSITIONS[from].includes(to)) throw new WindowTransitionError(key, from, to);
}

/**
 * A column the transition sets beside the status: a value (a parameter), an SQL expression both engines accept, or
 * one value per window (`each`, in the order of the keys, cast to `type`).
 */
export type SetValue = CatalogValue | { sql: string } | { each: readonly CatalogValue[]; type: 'VARCHAR' | 'BIGINT' | 'UUID' };

/**
 * Moves windows to `to` from any of `from` (by default every state that may go to `to`), setting `set` beside the
 * status, in one statement; returns those moved and those that were not in a `from` state (another worker moved them
 * first: the caller decides). `from` states the table does not allow to go to `to` are refused before anything is
 * written. With `strict`, a window left behind is an error naming it and its state.
 */
export async function moveWindows(
  ledger: Ledger,
  keys: readonly WindowKey[],
  to: WindowState,
  opts: { from?: readonly WindowState[]; set?: Readonly<Record<string, SetValue>>; strict?: boolean } = {},
): Promise<{ moved: WindowKey[]; missed: WindowKey[] }> {
  const from = opts.from ?? WINDOW_STATES.filter((s) => TRANSITIONS[s].includes(to));
  for (const s of from) checkEdge(keys[0] ?? { runId: '?', windowId: '?' }, s, to);
  if (keys.length === 0) return { moved: [], missed: [] };
  const params: (CatalogValue | readonly CatalogValue[])[] = [keys.map((k) => k.runId), keys.map((k) => k.windowId), to, [...from]];
  const sets = [`status = $3`, `updated_at = NOW()`];
  const columns = [`unnest(CAST($1 AS VARCHAR[])) AS r`, `unnest(CAST($2 AS VARCHAR[])) AS w`];
  for (const [column, value] of Object.entries(opts.set ?? {})) {
    if (value !== null && typeof value === 'object' && 'sql' in value) {
      sets.push(`${ident(column)} = ${value.sql}`);
    } else if (value !== null && typeof value === 'object' && 'each' in value) {
      params.push(value.each);
      columns.push(`unnest(CAST($${params.length} AS ${value.type}[])) AS v${params.length}`);
      sets.push(`${ident(column)} = k.v${params.length}`);
    } else {
      params.push(value);
      sets.push(`${ident(column)} = $${params.length}`);
    }
  }
  if ((to === 'committed' || to === 'provisional') && !opts.set?.committed_at) sets.push('committed_at = NOW()');
  const rows = await ledger.db.query(
    `UPDATE ${table(ledger)} SET ${sets.join(', ')}
     FROM (SELECT ${columns.join(', ')}) k
     WHERE run_id = k.r AND window_id = k.w AND status IN (SELECT unnest(CAST($4 AS VARCHAR[])))
     RETURNING run_id, window_id`,
    params,
  );
  const done = new Set(rows.map((r) => `${String(r.run_id)}\u0000${String(r.window_id)}`));
  const moved = keys.filter((k) => done.has(`${k.runId}\u0000${k.windowId}`));
  const missed = keys.filter((k) => !done.has(`${k.runId}\u0000${k.windowId}`));
  if (opts.strict && missed.length > 0) {
    const states = await windowStates(ledger, missed);
    const k = missed[0]!;
    throw new WindowTransitionError(k, states.get(`${k.runId}\u0000${k.windowId}`), to, from);
  }
  return { moved, missed };
}

/** The current state of each of `keys` (absent: no such window), keyed `<run>\0<window>`. */
export async function windowStates(ledger: Ledger, keys: readonly WindowKey[]): Promise<Map<string, string>> {
  if (keys.length === 0) return new Map();
  const rows = await ledger.db.query(
    `SELECT run_id, window_id, status FROM ${table(ledger)}
     WHERE EXISTS (SELECT 1 FROM (SELECT unnest(CAST($1 AS VARCHAR[])) AS r, unnest(CAST($2 AS VARCHAR[])) AS w) k WHERE k.r = run_id AND k.w = window_id)`,
    [keys.map((k) => k.runId), keys.map((k) => k.windowId)],
  );
  return new Map(rows.map((r) => [`${String(r.run_id)}\u0000${String(r.window_id)}`, String(r.status)]));
}

/** What a window's attempt counted: the same columns on both kinds of lake, whoever fetched it. */
export interface WindowCounts {
  rowsExpected: number;
  rowsGot: number;
  rejects: number;
  requests: number;
  retries: number;
  throttles: number;
  capHits: number;
  splits: number;
}

/** `counts` as the ledger's columns, for a transition's `set`. */
export function countColumns(counts: WindowCounts): Record<string, number> {
  return {
    rows_expected: counts.rowsExpected,
    rows_got: counts.rowsGot,
    rejects: counts.rejects,
    requests: counts.requests,
    retries: counts.retries,
    throttles: counts.throttles,
    cap_hits: counts.capHits,
    splits: counts.splits,
  };
}

/** What a worker records of a window it fetched into a fragment. */
export interface FetchedFacts extends WindowCounts {
  fragmentPath: string | null;
  rejectPath: string | null;
  fromBlock: number | null;
  toBlock: number | null;
  worker: string;
  /** The window's calls (lineage, JSON text: extract/request-log.ts encodeCalls), recorded in `requests` by its commit. */
  requestLog?: string | null;
  /** The window's spec as fetched (JSON text), when the fetch learnt something the commit needs (its block times). */
  spec?: string;
}

/** queued -> fetched; false when the window was no longer queued (another worker's turn recorded it first). */
export async function recordFetched(ledger: Ledger, key: WindowKey, f: FetchedFacts): Promise<boolean> {
  const { moved } = await moveWindows(ledger, [key], 'fetched', {
    from: ['queued'],
    set: {
      fragment_path: f.fragmentPath,
      reject_path: f.rejectPath,
      ...countColumns(f),
      from_block: f.fromBlock,
      to_block: f.toBlock,
      worker: f.worker,
      attempts: { sql: 'attempts + 1' },
      error: null,
      fetched_at: { sql: 'NOW()' },
      request_log: f.requestLog ?? null,
      ...(f.spec === undefined ? {} : { spec: f.spec }),
    },
  });
  return moved.length === 1;
}

/**
 * fetched -> committed (or provisional: a window given `provisional`, reaching into the unfinal zone), in the
 * committer's transaction: every window of the batch, its request log cleared (its calls are in `requests` now), or
 * an error naming the first that is not fetched.
 */
export async function recordCommitted(ledger: Ledger, keys: readonly (WindowKey & { provisional?: boolean })[], snapshotId: number): Promise<void> {
  for (const to of ['committed', 'provisional'] as const) {
    const some = keys.filter((k) => (to === 'provisional') === (k.provisional === true));
    if (some.length > 0) await moveWindows(ledger, some, to, { from: ['fetched'], set: { snapshot_id: snapshotId, request_log: null }, strict: true });
  }
}

/** queued -> failed: a window given up (its last attempt failed, or its queue job ended with nobody to fetch it). */
export async function recordFailed(ledger: Ledger, keys: readonly WindowKey[]): Promise<WindowKey[]> {
  return (await moveWindows(ledger, keys, 'failed', { from: ['queued'] })).moved;
}

/** failed | queued -> queued with a new queue job each: windows offered again. Any other state is refused, naming the window. */
export async function reofferWindows(ledger: Ledger, windows: readonly (WindowKey & { jobId: string })[]): Promise<void> {
  await moveWindows(ledger, windows, 'queued', {
    from: ['failed', 'queued'],
    set: { job_id: { each: windows.map((w) => w.jobId), type: 'UUID' }, error: null },
    strict: true,
  });
}

/**
 * committed | provisional -> queued with a new queue job each, `error` saying why: windows of an open distributed run
 * whose rows went with a table another DuckLake writer dropped (load/ledger/planning.ts runClaimsVoided), fetched
 * again into the table made again. Their commit's snapshot is cleared: it no longer holds their rows.
 */
export async function requeueVoided(ledger: Ledger, windows: readonly (WindowKey & { jobId: string })[], why: string): Promise<void> {
  await moveWindows(ledger, windows, 'queued', {
    from: ['committed', 'provisional'],
    set: {
      job_id: { each: windows.map((w) => w.jobId), type: 'UUID' },
      error: why,
      snapshot_id: null,
      committed_at: null,
      fragment_path: null,
      reject_path: null,
    },
    strict: true,
  });
}

/** A window a single-machine run records when it ends. */
export interface EndedWindow extends WindowCounts {
  runId: string;
  windowId: string | null;
  dataset: string;
  network: string;
  scope: string;
  fromBlock: number | null;
  toBlock: number | null;
  status: 'committed' | 'provisional' | 'failed' | 'fetched';
  error: string | null;
  /** A kept window's spec (JSON text: its window and staged files, pipeline/kept.ts); with `fetched` only. */
  spec?: string;
  /** A kept window's calls (JSON text), recorded in `requests` by the commit that takes it. */
  requestLog?: string;
}

const ENDED_COLUMNS = [
  ['run_id', 'VARCHAR'],
  ['window_id', 'VARCHAR'],
  ['dataset', 'VARCHAR'],
  ['network', 'VARCHAR'],
  ['scope', 'VARCHAR'],
  ['from_block', 'BIGINT'],
  ['to_block', 'BIGINT'],
  ['rows_expected', 'BIGINT'],
  ['rows_got', 'BIGINT'],
  ['rejects', 'BIGINT'],
  ['requests', 'BIGINT'],
  ['retries', 'BIGINT'],
  ['throttles', 'BIGINT'],
  ['cap_hits', 'BIGINT'],
  ['splits', 'BIGINT'],
  ['status', 'VARCHAR'],
  ['error', 'VARCHAR'],
  ['spec', 'VARCHAR'],
  ['request_log', 'VARCHAR'],
] as const;

/**
 * Records windows that ended (a single-machine run's, at its commit), or that a failed run kept (`fetched`, with
 * their spec and calls): one statement whatever their number.
 */
export async function recordEnded(ledger: Ledger, windows: readonly EndedWindow[]): Promise<void> {
  if (windows.length === 0) return;
  for (const w of windows) {
    if (!(FIRST_STATES.includes(w.status) || (w.status === 'fetched' && w.spec !== undefined)))
      throw new WindowTransitionError({ runId: w.runId, windowId: w.windowId ?? '-' }, undefined, w.status);
  }
  const values: (readonly CatalogValue[])[] = [
    windows.map((w) => w.runId),
    windows.map((w) => w.windowId),
    windows.map((w) => w.dataset),
    windows.map((w) => w.network),
    windows.map((w) => w.scope),
    windows.map((w) => w.fromBlock),
    windows.map((w) => w.toBlock),
    windows.map((w) => w.rowsExpected),
    windows.map((w) => w.rowsGot),
    windows.map((w) => w.rejects),
    windows.map((w) => w.requests),
    windows.map((w) => w.retries),
    windows.map((w) => w.throttles),
    windows.map((w) => w.capHits),
    windows.map((w) => w.splits),
    windows.map((w) => w.status),
    windows.map((w) => w.error),
    windows.map((w) => w.spec ?? null),
    windows.map((w) => w.requestLog ?? null),
  ];
  // A kept window's spec and calls only when there is one: the spec column is JSON, which a VARCHAR[] does not fill in
  // PostgreSQL (whose windows a single machine never keeps).
  const columns = windows.some((w) => w.spec !== undefined) ? ENDED_COLUMNS : ENDED_COLUMNS.slice(0, -2);
  values.length = columns.length;
  const names = columns.map(([n]) => n).join(', ');
  const unnests = columns.map(([n, t], i) => `unnest(CAST($${i + 1} AS ${t}[])) AS ${n}`).join(', ');
  await ledger.db.query(
    // One attempt: a single machine's run fetches a window once (its requests' retries are counted in `retries`).
    `INSERT INTO ${table(ledger)} (${names}, attempts, committed_at, fetched_at, updated_at)
     SELECT ${names}, 1, CASE WHEN status IN ('committed', 'provisional') THEN NOW() END, CASE WHEN status = 'fetched' THEN NOW() END, NOW()
     FROM (SELECT ${unnests}) k`,
    values,
  );
}

/** A window a failed single-machine run kept (`fetched`), as the next run reads it. */
export interface KeptRow extends WindowKey {
  /** The head of the run that kept it: a run resuming that run's chain takes it. */
  head: number | null;
  spec: string;
  requestLog: string | null;
}

/** The `fetched` windows of single-machine runs of `job` on `network`: what failed runs kept for the next. */
export async function readKept(ledger: Ledger, runs: string, job: string, network: string): Promise<KeptRow[]> {
  const rows = await ledger.db.query(
    // `w.*`: a catalog of an earlier format, read before any write migrates it, has no `spec` (and no kept window).
    `SELECT w.*, COALESCE(r.head, CAST(r.report ->> 'head' AS BIGINT)) AS head
     FROM ${table(ledger)} w JOIN ${runs} r ON r.run_id = w.run_id
     WHERE r.job = $1 AND w.network = $2 AND w.status = 'fetched'
     ORDER BY w.run_id`,
    [job, network],
  );
  return rows
    .filter((r) => typeof r.spec === 'string')
    .map((r) => ({
      runId: String(r.run_id),
      windowId: String(r.window_id),
      head: r.head === null || r.head === undefined ? null : Number(r.head),
      spec: String(r.spec),
      requestLog: r.request_log === null || r.request_log === undefined ? null : String(r.request_log),
    }))
    .sort((a, b) => (a.runId === b.runId ? (a.windowId < b.windowId ? -1 : 1) : 0));
}

/** fetched -> failed: kept windows the run does not take (their data gone or damaged, or not resumed): fetched again. */
export async function giveUpKept(ledger: Ledger, keys: readonly (WindowKey & { error: string })[]): Promise<void> {
  if (keys.length === 0) return;
  await moveWindows(ledger, keys, 'failed', { from: ['fetched'], set: { error: { each: keys.map((k) => k.error), type: 'VARCHAR' } } });
}

/** The runs that still have windows kept (`fetched`) on a single machine: the folders under `_kept` to leave alone. */
export async function runsWithKept(ledger: Ledger): Promise<Set<string>> {
  const rows = await ledger.db.query(`SELECT DISTINCT run_id FROM ${table(ledger)} WHERE status = 'fetched'`);
  return new Set(rows.map((r) => String(r.run_id)));
}
