// The runs a worker fetches windows of: each run's stored job parsed once with this machine's environment (base
// URLs, the API key a stored job leaves out), its source opened once, its quota shared with the account's workers.
import type pg from 'pg';
import { getDataset } from '../datasets/registry.js';
import { parseJob, type Job } from '../pipeline/job.js';
import { WINDOW_ROWS } from '../pipeline/plan.js';
import { pagerOptionsOf } from '../pipeline/prepare.js';
import { openSource } from '../pipeline/source.js';
import { RowTransformer } from '../transform/rows.js';
import { SharedQuota } from './account.js';
import { CONTROL_SCHEMA, controlLedger } from './control-plane.js';
import { ControlPlaneError } from './errors.js';
import { ledgerBlockTimes } from '../load/ledger/block-times.js';
import type { RunContext } from './fragment.js';
import type { DistributedOptions } from './enqueue.js';

/** What opening a run takes of the worker's options. */
export type RunOpening = DistributedOptions & { windowRows?: number; env?: NodeJS.ProcessEnv };

/** A run's job as its enqueuer stored it, parsed here: this machine's environment gives URLs and the API key. */
export type OpenRun = RunContext & { quota?: SharedQuota; close(): Promise<void> };

export async function openRun(
  client: Pick<pg.Client, 'query'>,
  runId: string,
  opts: RunOpening,
  quotaOf: (job: Job) => SharedQuota | undefined,
): Promise<OpenRun> {
  const row = (await client.query(`SELECT job_doc, job_file, ingested_at FROM ${CONTROL_SCHEMA}.runs WHERE run_id = $1`, [runId])).rows[0];
  if (!row) {
    throw new ControlPlaneError(
      `run ${runId} is not in the control plane: the queue offered a window of it, but ${CONTROL_SCHEMA}.runs has no such run`,
      `its runs were removed, or the database restored from an older backup, while the queue kept their jobs: the run's windows fail; chainlake enqueue plans the job anew`,
    );
  }
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
    // Each block of the run asked once by all its workers, not once per worker (windows of one range go to several).
    blockTimes: ledgerBlockTimes(controlLedger(client).db, runId, CONTROL_SCHEMA),
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

/**
 * The runs a worker has opened, each once (the first window of a run opens it; the others wait for that), with
 * its quota on the worker's quota connection when the job has a daily quota.
 */
export class RunContexts {
  private readonly runs = new Map<string, Promise<OpenRun>>();
  private readonly opened: OpenRun[] = [];

  constructor(
    private readonly leases: Pick<pg.Client, 'query'>,
    private readonly opts: RunOpening,
    private readonly quotaOf: (job: Job) => SharedQuota | undefined,
  ) {}

  get(runId: string): Promise<OpenRun> {
    let ctx = this.runs.get(runId);
    if (!ctx) {
      ctx = openRun(this.leases, runId, this.opts, this.quotaOf);
      ctx.then((c) => this.opened.push(c)).catch(() => undefined);
      this.runs.set(runId, ctx);
    }
    return ctx;
  }

  /** Whether the account's quota for today is spent (as any run opened here saw it). */
  quotaReachedToday(): boolean {
    return this.opened.some((c) => c.quota?.reachedToday());
  }

  async close(): Promise<void> {
    for (const r of this.runs.values()) await (await r.catch(() => undefined))?.close();
  }
}
