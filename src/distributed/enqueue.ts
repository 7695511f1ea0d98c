/**
 * `chainlake enqueue`: plans a job against the control plane and queues its windows for the workers. The plan is
 * the single-machine run's (windowsToFetch, on the control plane's ledger: plan-ledger.ts), pinned to one head; the run and its
 * windows are recorded and queued in one transaction, with deterministic ids, so enqueueing again while the run
 * is unfinished adds no work, and a run's windows are the same whoever fetches them.
 */
import { Accounting } from '../extract/accounting.js';
import { parseJob, type Job } from '../pipeline/job.js';
import type { Window } from '../pipeline/plan.js';
import { needsHead, windowsToFetch, type Prepared } from '../pipeline/prepare.js';
import type { Clients } from '../pipeline/execute.js';
import { newRunId } from '../pipeline/run.js';
import { openSource, type SourceOptions } from '../pipeline/source.js';
import { abiFromApi } from '../pipeline/decode-in-run.js';
import type { ExplorerClient } from '../extract/explorer.js';
import type { DecodedDataset } from '../decode/datasets.js';
import { resolveDatasets } from '../decode/spec.js';
import { ChainlakeError } from '../errors.js';
import { reofferWindows, requeueVoided } from '../load/ledger/windows.js';
import { voidWatermarks } from '../load/ledger/watermarks.js';
import { runClaimsVoided } from '../load/ledger/planning.js';
import { voidedText, type VoidedClaim } from '../load/ledger/voided.js';
import { atFinality, finalBlockOf, joinWindows, subtractRanges } from '../pipeline/prepare.js';
import { windowIdOf, windowsOf } from '../pipeline/plan.js';
import type { BlockRange } from '../extract/pager.js';
import { CATALOG_SCHEMA, CONTROL_SCHEMA, QUEUE_SCHEMA, WINDOW_QUEUE, connect, controlLedger, setupControlPlane, underSetupLock } from './control-plane.js';
import { againJobId, DEFAULT_QUEUE_SETTINGS, openQueue, sendWindows, windowJobId, type QueueSettings } from './queue.js';
import { closeEndedRuns, lockRuns, RUN_RUNNING } from './runs.js';
import { openStore, type StoreConnection } from './store.js';
import { controlPlanLedger, DEFAULT_ACCOUNT, hasLake } from './plan-ledger.js';
import { SharedQuota } from './account.js';
import { windowSpecOf, type WindowSpec } from './windows.js';

export interface DistributedOptions extends Pick<SourceOptions, 'simulator' | 'transport'> {
  /** postgres://… of the control plane. */
  catalog: string;
  /** The store's location on this machine (see Store). */
  store: string;
  /** How this machine reaches the store when it is object storage (endpoint, region), resolved at the top. */
  storeConnection?: StoreConnection;
  queue?: Partial<QueueSettings>;
  /**
   * The API account enqueue's own requests (the head lookup, an ABI) are charged to, under the job's daily quota:
   * the account of the key it sends them with (the job's apiKey, else CHAINLAKE_API_KEY), as `chainlake worker
   * --account` names a worker's. Default `default`, the workers' default.
   */
  account?: string;
}

export interface EnqueueResult {
  runId: string;
  /** True when a run of the job was taken up again (an unfinished one, or with `retryFailed` the last one): nothing new was planned. */
  resumed: boolean;
  head: number | null;
  /** Windows recorded and queued by this call (planned, or of a run taken up again whose queue job was gone). */
  queued: number;
  /** Windows that had failed, offered again by this call (each back to `queued`, with a fresh queue job). */
  retried: number;
  /** Windows the watermarks say are in the lake already. */
  skipped: number;
  /**
   * Datasets whose ledger claims planning found void (another DuckLake writer dropped their table): their whole
   * range is queued, and their watermarks were deleted with the run's record. Of a run taken up, its windows of them
   * that were committed are queued again (their rows went with the table), with those of the range it lacked.
   */
  voided?: VoidedClaim[];
  /** Windows of the run not yet committed. */
  pending: number;
  /**
   * Requests this call sent to the API (the head lookup, an ABI): the run's totals count them, and under a daily
   * quota so does the account's `request_usage`, as a local run counts its head pin.
   */
  requests: number;
}

export interface EnqueueHow {
  /**
   * Take up the job's last run again even if it has ended, offering its failed windows again (with its pinned head),
   * instead of planning a new run from the watermarks.
   */
  retryFailed?: boolean;
  /**
   * Exactly these windows, as a run of their own, instead of the windows planned from the watermarks
   * (`verify --repair`: the windows that differ from the API, fetched again over what the lake holds).
   */
  windows?: readonly Window[];
}

export async function enqueueJob(job: Job, doc: unknown, opts: DistributedOptions, how: EnqueueHow = {}): Promise<EnqueueResult> {
  const settings = { ...DEFAULT_QUEUE_SETTINGS, ...opts.queue };
  const store = await openStore(opts.store, opts.storeConnection);
  await store.close();
  const client = await connect(opts.catalog);
  try {
    await setupControlPlane(client, store.dataPath);
    const boss = await underSetupLock(client, () => openQueue(opts.catalog, settings, false));
    try {
      const run = await runToTakeUp(client, job, how.retryFailed === true);
      if (run && how.windows) {
        // Its workers would work that run too: the repair would fetch more than the windows that differ.
        throw new ChainlakeError(`job ${job.name} on ${job.what.network} has an unfinished run (${run.runId}): a repair fetches only the windows that differ`, {
          code: 'CHAINLAKE_USAGE',
          hint: 'let the workers finish that run (chainlake worker --until-idle), then repair',
        });
      }
      if (run) {
        const voided = (await hasLake(client))
          ? (await runClaimsVoided(controlLedger(client), CATALOG_SCHEMA, job.what.network, run.runId)).filter((v) =>
              job.what.datasets.some((d) => d.name === v.dataset),
            )
          : [];
        return {
          ...run,
          resumed: true,
          requests: 0,
          ...(await offerAgain(client, boss, run, settings, { job, voided })),
          ...(voided.length ? { voided } : {}),
        };
      }
      if (how.retryFailed) {
        throw new ChainlakeError(`--retry-failed: job ${job.name} on ${job.what.network} has no run in this control plane: nothing failed to offer again`, {
          code: 'CHAINLAKE_USAGE',
          hint: 'enqueue the job without --retry-failed to plan its first run',
        });
      }
      return await planAndQueue(job, doc, opts, client, boss, settings, how.windows);
    } finally {
      await boss.stop({ graceful: false, close: true, wait: true });
    }
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * The run of `job` that enqueue takes up again instead of planning a new one: its unfinished run, else (with
 * `retryFailed`) its last run; undefined when a new run is planned (what `chainlake plan --catalog` then lists).
 */
export async function runToTakeUp(client: import('pg').Client, job: Job, retryFailed: boolean): Promise<{ runId: string; head: number | null } | undefined> {
  const run = (
    await client.query(
      `SELECT run_id, head, finished_at IS NULL AS open FROM ${CONTROL_SCHEMA}.runs WHERE job = $1 AND network = $2
       ${retryFailed ? '' : 'AND finished_at IS NULL'} ORDER BY finished_at IS NULL DESC, started_at DESC, run_id DESC LIMIT 1`,
      [job.name, job.what.network],
    )
  ).rows[0];
  return run ? { runId: String(run.run_id), head: toNum(run.head) } : undefined;
}

/**
 * The datasets of the job's `decode` key, resolved at enqueue and kept with the run (runs.decode): the committer
 * decodes with them, and neither it nor the workers read the job's ABI files or ask the API for an ABI. A
 * contract given without signatures or an ABI file takes its ABI from the API (explorer #14), as a run does when
 * its lake lacks it: a distributed lake's `contracts` dataset is not read for it.
 */
async function resolveDecode(job: Job, explorer: ExplorerClient | undefined, acct: Accounting): Promise<DecodedDataset[] | undefined> {
  if (!job.what.decode) return undefined;
  return resolveDatasets(job.what.decode, { network: job.what.network, ...(explorer ? { fetchAbi: abiFromApi(explorer, acct) } : {}) });
}

/** Whether resolving the job's `decode` key asks the API for an ABI. */
const decodeNeedsApi = (job: Job): boolean => job.what.decode?.contracts.some((c) => !c.signatures && !c.abiFile) ?? false;

const toNum = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));

/**
 * Takes a run up again: every window of it that failed for good, or that is queued while its queue job is over
 * (gone, or failed after its worker died past its retries), goes back to `queued` with a fresh queue job; an ended
 * run is opened again. One transaction under the run's lock (see closeEndedRuns): a worker closing the run at the
 * same moment either sees the windows queued again or closes it before them, and then this opens it again.
 *
 * `voided`: datasets of the run whose table another DuckLake writer dropped since it was planned (runClaimsVoided).
 * Their claims are voided here as planning voids them: the watermarks deleted, the run's committed windows of them
 * queued again (their rows went with the table), and the windows of their range the run lacks (an incremental run
 * planned from the marks) added, so that the table the next commit makes again holds the whole range.
 */
async function offerAgain(
  client: import('pg').Client,
  boss: import('pg-boss'),
  run: { runId: string; head: number | null },
  settings: QueueSettings,
  drop: { job: Job; voided: readonly VoidedClaim[] },
) {
  const { runId } = run;
  await client.query('BEGIN');
  try {
    const others = await openRunsClaiming(client, runId, drop.voided);
    await lockRuns((text, values) => client.query(text, values), [runId, ...others.map((o) => o.runId)]);
    const refetched = drop.voided.length ? await refetchVoided(client, boss, run, settings, drop.job, drop.voided) : 0;
    await voidOpenRuns(client, boss, settings, others, drop.voided);
    const over = (
      await client.query(
        `SELECT w.window_id, w.job_id, w.status FROM ${CONTROL_SCHEMA}.windows w
         WHERE w.run_id = $1 AND (w.status = 'failed' OR (w.status = 'queued' AND NOT EXISTS (
           SELECT 1 FROM ${QUEUE_SCHEMA}.job j WHERE j.name = $2 AND j.id = w.job_id AND j.state IN ('created', 'retry', 'active'))))
         ORDER BY w.window_id`,
        [runId, WINDOW_QUEUE],
      )
    ).rows.map((r) => ({ windowId: String(r.window_id), previous: String(r.job_id), failed: r.status === 'failed' }));
    const again = over.map((w) => ({ ...w, runId, jobId: againJobId(runId, w.windowId, w.previous) }));
    if (again.length > 0 || refetched > 0) {
      await reofferWindows(controlLedger(client), again);
      await sendWindows(boss, client, again, settings);
      await client.query(`UPDATE ${CONTROL_SCHEMA}.runs SET finished_at = NULL, status = '${RUN_RUNNING}' WHERE run_id = $1 AND finished_at IS NOT NULL`, [
        runId,
      ]);
    }
    // An open run whose windows have all ended with none to offer again (a close that did not happen) ends here.
    await closeEndedRuns((text, values) => client.query(text, values), [runId]);
    const pending = Number(
      (
        await client.query(`SELECT count(*)::BIGINT AS n FROM ${CONTROL_SCHEMA}.windows WHERE run_id = $1 AND status NOT IN ('committed', 'provisional')`, [
          runId,
        ])
      ).rows[0].n,
    );
    await client.query('COMMIT');
    const retried = again.filter((w) => w.failed).length;
    return { queued: again.length - retried + refetched, retried, skipped: 0, pending };
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}

/**
 * Voids, in offerAgain's transaction, the claims of a taken-up run on `voided`'s datasets: their watermarks go, the
 * run's windows of them that were committed are queued again, and the windows of the range the run lacks are added
 * (planned at the run's head as on an empty lake, less the ranges its windows hold). Returns the windows queued.
 */
async function refetchVoided(
  client: import('pg').Client,
  boss: import('pg-boss'),
  run: { runId: string; head: number | null },
  settings: QueueSettings,
  job: Job,
  voided: readonly VoidedClaim[],
): Promise<number> {
  const { runId, head } = run;
  const datasets = voided.map((v) => v.dataset);
  const ledger = controlLedger(client);
  await voidWatermarks(ledger, datasets);
  const windows = (
    await client.query(
      `SELECT window_id, job_id, status, dataset, scope, spec -> 'range' AS range FROM ${CONTROL_SCHEMA}.windows WHERE run_id = $1 AND dataset = ANY($2::text[])`,
      [runId, datasets],
    )
  ).rows as { window_id: string; job_id: string; status: string; dataset: string; scope: string; range: BlockRange | null }[];
  const committed = windows
    .filter((w) => w.status === 'committed' || w.status === 'provisional')
    .map((w) => ({ runId, windowId: w.window_id, jobId: againJobId(runId, w.window_id, w.job_id) }));
  const why = (dataset: string) =>
    voidedText(
      voided.find((v) => v.dataset === dataset)!,
      job.what.network,
    );
  // The void in the run's own record (its `report`, which `query runs` reads), beside its windows' error text: which
  // table's claims it lost, and how many of its committed windows went with it. A run whose claims on a table another
  // writer created again were voided knowing of that drop holds its claims on the new table (load/ledger/recreated.ts).
  const record = voided.map((v) => ({
    ...v,
    windows: committed.filter((w) => windows.some((x) => x.window_id === w.windowId && x.dataset === v.dataset)).length,
  }));
  await client.query(
    `UPDATE ${CONTROL_SCHEMA}.runs SET report = COALESCE(report, '{}'::jsonb) || jsonb_build_object('voided', COALESCE(report -> 'voided', '[]'::jsonb) || $2::jsonb)
     WHERE run_id = $1`,
    [runId, JSON.stringify(record)],
  );
  for (const dataset of datasets) {
    const mine = new Set(windows.filter((w) => w.dataset === dataset).map((w) => w.window_id));
    await requeueVoided(
      ledger,
      committed.filter((w) => mine.has(w.windowId)),
      why(dataset),
    );
  }
  // The range below an incremental run's windows was in the dropped table too: planned again as a first run plans it.
  const held = new Map<string, BlockRange[]>();
  for (const w of windows) if (w.range) held.set(`${w.dataset}|${w.scope}`, [...(held.get(`${w.dataset}|${w.scope}`) ?? []), w.range]);
  const lacking: Window[] = [];
  if (head !== null) {
    const final = finalBlockOf(job.what, head);
    for (const w of windowsOf(job.what, head)) {
      if (!w.range || !datasets.includes(w.def.name)) continue;
      for (const range of subtractRanges(w.range, held.get(`${w.def.name}|${w.scopeKey}`) ?? []))
        lacking.push(...atFinality({ ...w, range, id: windowIdOf(w.def.name, w.network, w.scopeKey, range) }, final));
    }
  }
  const added = job.what.range.fixedChunks ? lacking : joinWindows(lacking, new Map());
  await insertWindows(
    client,
    runId,
    added.map((w) => ({ windowId: w.id, spec: windowSpecOf(w) })),
  );
  await sendWindows(boss, client, [...committed, ...added.map((w) => ({ runId, windowId: w.id }))], settings);
  return committed.length + added.length;
}

/** An open run (other than the one enqueued) with committed windows of a voided dataset, and its job as its enqueuer stored it. */
interface OpenClaimant {
  runId: string;
  head: number | null;
  job: Job;
}

/** The open runs but `runId` whose committed windows claim rows of `voided`'s datasets (voidOpenRuns). */
async function openRunsClaiming(client: import('pg').Client, runId: string, voided: readonly VoidedClaim[]): Promise<OpenClaimant[]> {
  if (voided.length === 0) return [];
  const rows = (
    await client.query(
      `SELECT r.run_id, r.head, r.job_doc, r.job_file FROM ${CONTROL_SCHEMA}.runs r
       WHERE r.finished_at IS NULL AND r.run_id <> $1 AND EXISTS (
         SELECT 1 FROM ${CONTROL_SCHEMA}.windows w WHERE w.run_id = r.run_id AND w.dataset = ANY($2::text[]) AND w.status IN ('committed', 'provisional'))
       ORDER BY r.run_id`,
      [runId, voided.map((v) => v.dataset)],
    )
  ).rows as { run_id: string; head: unknown; job_doc: unknown; job_file: string }[];
  // Its job only for what it plans (datasets, range, windows): no key is read here (each worker has its own).
  return rows.map((r) => ({ runId: String(r.run_id), head: toNum(r.head), job: parseJob(r.job_doc, String(r.job_file), {}) }));
}

/**
 * Voids, in the transaction of the enqueue that voids its own run's claims (offerAgain, queueRun), the claims of every
 * other open run on the datasets whose table another DuckLake writer dropped, as that run's own take-up would
 * (refetchVoided: its committed windows of them queued again, the range it lacks added). The table held every run's
 * rows: left standing, those windows would be a live run's claims on the table this run makes again, refusing its
 * commits until every such run were taken up (load/write/dropped-tables.ts), and a run taken up after the table was
 * made again would find it there and keep claims on rows it no longer holds. `others` are locked by the caller.
 */
async function voidOpenRuns(
  client: import('pg').Client,
  boss: import('pg-boss'),
  settings: QueueSettings,
  others: readonly OpenClaimant[],
  voided: readonly VoidedClaim[],
): Promise<void> {
  for (const other of others) {
    const mine = voided.filter((v) => other.job.what.datasets.some((d) => d.name === v.dataset));
    if (mine.length) await refetchVoided(client, boss, other, settings, other.job, mine);
  }
}

async function planAndQueue(
  job: Job,
  doc: unknown,
  opts: DistributedOptions,
  client: import('pg').Client,
  boss: import('pg-boss'),
  settings: QueueSettings,
  given?: readonly Window[],
): Promise<EnqueueResult> {
  const acct = new Accounting();
  const { prepared, decode } = await planRun(job, opts, client, acct, given);
  const { head, windows } = prepared;
  const runId = await queueRun(client, boss, settings, { job, doc, prepared, decode, acct });
  return {
    runId,
    resumed: false,
    head,
    queued: windows.length,
    retried: 0,
    skipped: given ? 0 : prepared.skipped,
    pending: windows.length,
    requests: acct.requests,
    ...(prepared.voided.length ? { voided: prepared.voided } : {}),
  };
}

/**
 * The run's windows and what it decodes. The single machine's planner on the control plane's ledger: the windows
 * `run` would fetch of a local lake with the same history, and the ones `chainlake plan --catalog` lists. The API is
 * asked only for a head to find or an ABI to fetch; those requests are counted in `acct` and, under a daily quota,
 * pass the account's quota as a worker's do (enqueueQuota).
 */
async function planRun(
  job: Job,
  opts: DistributedOptions,
  client: import('pg').Client,
  acct: Accounting,
  given?: readonly Window[],
): Promise<{ prepared: Prepared; decode: DecodedDataset[] | undefined }> {
  const plan = (clients: Clients) =>
    windowsToFetch(
      { baseJob: job, job, fullRefresh: false, ...(given ? { windows: [...given] } : {}) },
      controlPlanLedger(client, opts.catalog, opts.account ?? DEFAULT_ACCOUNT),
      clients,
      acct,
    );
  if (!needsHead(job.what) && !decodeNeedsApi(job)) return { prepared: await plan({}), decode: await resolveDecode(job, undefined, acct) };
  const quota = await enqueueQuota(job, opts);
  try {
    const source = await openSource(job.source, { simulator: opts.simulator, transport: opts.transport, ...(quota ? { quota: quota.gate } : {}) });
    try {
      const { clients } = source;
      return { prepared: await plan(clients), decode: await resolveDecode(job, clients.explorer, acct) };
    } finally {
      await source.close();
    }
  } finally {
    await quota?.close();
  }
}

/**
 * The account's daily quota that enqueue's requests pass, when the job has one: the workers' (account.ts), in
 * `chainlake.request_usage` per account and UTC day, so the day's count holds every request the API saw, and one
 * refused leaves enqueue with the single machine's QuotaReachedError (a run at its quota does not start). On a
 * connection of its own, as a worker's (its top-ups are transactions), one request per reservation; what it
 * reserved and did not send is given back when planning ends.
 */
async function enqueueQuota(job: Job, opts: DistributedOptions): Promise<{ gate: SharedQuota; close(): Promise<void> } | undefined> {
  const limit = job.source.dailyRequestQuota;
  if (limit === undefined) return undefined;
  const client = await connect(opts.catalog);
  // One request reserved at a time, not a worker's block: enqueue holds no account lease, and a block it held would
  // be refused, for the rest of the day, to the account's fetching worker near the end of the quota.
  const gate = new SharedQuota(client, opts.account ?? DEFAULT_ACCOUNT, limit, undefined, 1);
  return {
    gate,
    async close() {
      try {
        await gate.release();
      } finally {
        await client.end().catch(() => undefined);
      }
    },
  };
}

/**
 * Records the run and its windows and queues one job per window, in one PostgreSQL transaction (a run without a
 * window to fetch is closed at once); returns the run's id.
 */
async function queueRun(
  client: import('pg').Client,
  boss: import('pg-boss'),
  settings: QueueSettings,
  run: { job: Job; doc: unknown; prepared: Prepared; decode: DecodedDataset[] | undefined; acct: Accounting },
): Promise<string> {
  const { job, doc, decode, acct } = run;
  const { head, range, windows } = run.prepared;
  const started = new Date();
  const runId = newRunId(started);
  await client.query('BEGIN');
  try {
    await client.query(
      `INSERT INTO ${CONTROL_SCHEMA}.runs (run_id, job, network, job_doc, job_file, head, range_from, range_to, ingested_at, decode, outside_windows, report)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
      [
        runId,
        job.name,
        job.what.network,
        JSON.stringify(storableDoc(doc)),
        job.file,
        head,
        range.from,
        head === null ? null : range.to,
        started.toISOString(),
        decode ? JSON.stringify(decode) : null,
        JSON.stringify({ requests: acct.requests, retries: acct.retries, throttles: acct.throttles }),
        // The void in the run's record, as a local run's start record has it: the claims on a table another writer
        // created again are this run's from now on (load/ledger/recreated.ts), and `query runs` shows it.
        run.prepared.voided.length ? JSON.stringify({ voided: run.prepared.voided }) : null,
      ],
    );
    // Two statements whatever the plan's size: two round trips per window made a large job's enqueue slow.
    await insertWindows(
      client,
      runId,
      windows.map((w) => ({ windowId: w.id, spec: windowSpecOf(w) })),
    );
    await sendWindows(
      boss,
      client,
      windows.map((w) => ({ runId, windowId: w.id })),
      settings,
    );
    if (windows.length === 0) await closeEndedRuns((text, values) => client.query(text, values), [runId]);
    // The void made lasting with the run that fetches the range again, before a commit makes the table again.
    await voidWatermarks(
      controlLedger(client),
      run.prepared.voided.map((v) => v.dataset),
    );
    const others = await openRunsClaiming(client, runId, run.prepared.voided);
    await lockRuns(
      (text, values) => client.query(text, values),
      others.map((o) => o.runId),
    );
    await voidOpenRuns(client, boss, settings, others, run.prepared.voided);
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
  return runId;
}

/**
 * The job document as the control plane keeps it: without an `apiKey` (never stored: each worker's key comes
 * from its own CHAINLAKE_API_KEY, which also says whose account it spends).
 */
export function storableDoc(doc: unknown): unknown {
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) return doc;
  const { apiKey: _key, ...rest } = doc as Record<string, unknown>;
  return rest;
}

/** Records windows of a run in one statement (those recorded already are left as they are); returns how many were new. */
async function insertWindows(
  client: { query: import('pg').Client['query'] },
  runId: string,
  windows: readonly { windowId: string; spec: WindowSpec }[],
): Promise<number> {
  const r = await client.query(
    `INSERT INTO ${CONTROL_SCHEMA}.windows (run_id, window_id, dataset, network, scope, spec, job_id, from_block, to_block)
     SELECT $1, k.window_id, k.dataset, k.network, k.scope, k.spec::jsonb, k.job_id, k.from_block, k.to_block
     FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::uuid[], $8::bigint[], $9::bigint[])
       AS k(window_id, dataset, network, scope, spec, job_id, from_block, to_block)
     ON CONFLICT DO NOTHING`,
    [
      runId,
      windows.map((w) => w.windowId),
      windows.map((w) => w.spec.dataset),
      windows.map((w) => w.spec.network),
      windows.map((w) => w.spec.scopeKey),
      windows.map((w) => JSON.stringify(w.spec)),
      windows.map((w) => windowJobId(runId, w.windowId)),
      windows.map((w) => w.spec.range?.from ?? null),
      windows.map((w) => w.spec.range?.to ?? null),
    ],
  );
  return r.rowCount ?? 0;
}

/** Records a window of a run (nothing when it is recorded already). */
export async function insertWindow(client: { query: import('pg').Client['query'] }, runId: string, windowId: string, spec: WindowSpec): Promise<boolean> {
  return (await insertWindows(client, runId, [{ windowId, spec }])) > 0;
}
