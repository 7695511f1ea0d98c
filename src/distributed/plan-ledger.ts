/**
 * The control plane's run ledger as a planner reads it (pipeline/prepare.ts `PlanLedger`): the statements of
 * load/ledger/planning.ts, which read a local lake's catalog the same way, over the `chainlake` schema. So
 * `enqueue` plans with the single machine's prepareRun, and `chainlake plan --catalog` lists what it would queue.
 */
import type pg from 'pg';
import { readLastRunPace, readLedgerState, readRequestUsage } from '../load/ledger/planning.js';
import type { PlanLedger } from '../pipeline/prepare.js';
import { CATALOG_SCHEMA, CONTROL_SCHEMA, controlLedger } from './control-plane.js';
import { redactUrl } from './url.js';

/** The account whose daily quota a plan reads when none is named: the workers' default (worker.ts). */
export const DEFAULT_ACCOUNT = 'default';

/**
 * The ledger of the control plane `client` is connected to (`url` names it in a plan, without its password).
 * An unfinished distributed run is not resumed by planning (enqueue offers its windows again itself): the state
 * has no resume point. The daily quota is the workers' account's (`account`, as `chainlake worker --account`).
 */
export function controlPlanLedger(client: pg.Client, url: string, account = DEFAULT_ACCOUNT): PlanLedger {
  const ledger = controlLedger(client);
  return {
    lake: redactUrl(url),
    state: async (job) =>
      (await hasLedger(client))
        ? readLedgerState(ledger, job.name, job.what.network, { resume: false, ...((await hasLake(client)) ? { lake: CATALOG_SCHEMA } : {}) })
        : { watermarks: new Map() },
    requestsOn: async (_job, day) => ((await hasLedger(client)) ? ((await readRequestUsage(ledger, account)).get(day) ?? 0) : 0),
    lastRun: async (job) => ((await hasLedger(client)) ? readLastRunPace(ledger, job.name, job.what.network) : undefined),
  };
}

/** Whether the control plane has a ledger yet (a plan before the first enqueue or worker creates nothing). */
export async function hasLedger(client: pg.Client): Promise<boolean> {
  const r = await client.query(`SELECT 1 FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'request_usage'`, [CONTROL_SCHEMA]);
  return (r.rowCount ?? 0) > 0;
}

/** Whether the control plane holds the lake's DuckLake catalog yet (the ledger's claims are checked against it). */
export async function hasLake(client: pg.Client): Promise<boolean> {
  const r = await client.query(`SELECT 1 FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'ducklake_table'`, [CATALOG_SCHEMA]);
  return (r.rowCount ?? 0) > 0;
}
