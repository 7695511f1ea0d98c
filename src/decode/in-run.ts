// Decoding inside an export run: after the run's last commit, the event logs it wrote are decoded into the
// datasets its job's `decode` key names, in a commit of their own. A contract whose ABI the lake does not
// hold gets it from the API (#14).

import { Accounting } from '../extract/accounting.js';
import type { ExplorerClient } from '../extract/explorer.js';
import type { Engine } from '../load/engine.js';
import type { LakePaths } from '../load/paths.js';
import type { Job } from '../pipeline/job.js';
import type { Logger } from '../pipeline/log.js';
import type { RunReport } from '../pipeline/report.js';
import { decodeLake, type DecodeReport } from './lake.js';
import { resolveDatasets } from './spec.js';

/** Decodes the run's event logs; a failure is the report's error (the export stays committed). */
export async function decodeAfterExport(
  job: Job,
  ctx: { engine: Engine; paths: LakePaths; runId: string; ingestedAt: string; stagingDir: string; log: Logger; explorer?: ExplorerClient },
  report: RunReport,
): Promise<DecodeReport | undefined> {
  if (!job.decode) return undefined;
  const started = Date.now();
  try {
    const explorer = ctx.explorer;
    const fetchAbi = explorer
      ? async (address: string): Promise<unknown> =>
          ((await explorer.get('contract_abi', `/v1/contracts/${address}/abi`, {}, new Accounting())) as { data?: unknown })?.data
      : undefined;
    const datasets = await resolveDatasets(job.decode, { conn: ctx.engine.conn, paths: ctx.paths, network: job.network, fetchAbi });
    const r = await decodeLake({ ...ctx, network: job.network, datasets, onlyRunId: ctx.runId });
    ctx.log.log(
      'info',
      'decode.done',
      `decoded ${r.logs} logs in ${Date.now() - started} ms: ${r.datasets.map((d) => `${d.name} ${d.rows}`).join(', ')}${r.rejects ? `; ${r.rejects} rejects` : ''}`,
      { ...r },
    );
    return r;
  } catch (e) {
    const error = `decode: ${(e as Error).message}`;
    ctx.log.log('error', 'decode.failed', error, { error });
    report.errors.push({ window: 'decode', error });
    if (report.status === 'complete') report.status = 'partial';
    return undefined;
  }
}
