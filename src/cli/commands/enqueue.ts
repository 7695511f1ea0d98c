import type { CommandModule } from 'yargs';
import { checkCatalogUrl } from '../../distributed/control-plane.js';
import { enqueueJob } from '../../distributed/enqueue.js';
import { loadJobDocument } from '../../pipeline/job.js';
import { DEFAULT_QUEUE_SETTINGS } from '../../distributed/queue.js';
import { voidedText } from '../../load/ledger/voided.js';
import { finalityDepthOption, finalityDepthOverride, outputFor, withDistributedOptions } from '../common.js';
import { CliError } from '../exit-codes.js';
import { distributedFlags } from '../lake-target.js';

interface Args {
  job: string;
  catalog?: string;
  store?: string;
  'window-timeout': number;
  account: string;
  'retry-failed'?: boolean;
  'finality-depth'?: number;
  'log-format'?: 'text' | 'json';
  quiet?: boolean;
  verbose?: boolean;
}

export const enqueueCommand: CommandModule<object, Args> = {
  command: 'enqueue <job>',
  describe: 'Distributed mode: plan a job and queue its windows for `chainlake worker` processes (PostgreSQL control plane)',
  builder: (y) =>
    withDistributedOptions(y)
      .positional('job', { type: 'string', demandOption: true, describe: 'Path to the job file (JSON)' })
      .option('window-timeout', {
        type: 'number',
        default: DEFAULT_QUEUE_SETTINGS.windowTimeoutSeconds,
        describe: 'Seconds a worker may hold a window before the queue presumes it dead and offers the window to another worker',
      })
      .option('account', {
        type: 'string',
        default: process.env.CHAINLAKE_ACCOUNT || 'default',
        defaultDescription: '$CHAINLAKE_ACCOUNT or default',
        describe:
          "The API account enqueue's own requests (the chain head, an ABI) are charged to under the job's dailyRequestQuota: the account of the key it sends them with, as `chainlake worker --account`",
      })
      .option('finality-depth', finalityDepthOption)
      .option('retry-failed', {
        type: 'boolean',
        describe:
          "Offer the failed windows of the job's last run again, with that run's head, even if the run has ended (without it, an ended run's failed blocks are planned anew from the watermarks)",
      })
      .example('$0 enqueue jobs/nightly.example.json --catalog postgres://chainlake@db/lake --store /mnt/lake', 'Queue the nightly job; workers fetch it')
      .example(
        '$0 enqueue jobs/nightly.example.json --retry-failed',
        "Offer the windows of the job's last run that failed (a refused key, a long outage) again",
      ),
  handler: async (args) => {
    const flags = distributedFlags(args);
    const catalog = checkCatalogUrl(flags.catalog);
    const { logger } = outputFor(args);
    const { job, doc } = await loadJobDocument(args.job, process.env, finalityDepthOverride(args['finality-depth']));
    const timeout = args['window-timeout'];
    if (!Number.isInteger(timeout) || timeout < 5) throw new CliError(`--window-timeout: expected whole seconds, at least 5, got ${String(timeout)}`);
    const r = await enqueueJob(
      job,
      doc,
      { catalog, store: flags.store ?? '', storeConnection: flags.storeConnection, queue: { windowTimeoutSeconds: timeout }, account: args.account },
      { retryFailed: args['retry-failed'] },
    );
    const again = [r.retried ? `${r.retried} failed windows offered again` : '', r.queued ? `${r.queued} windows whose queue job was over queued again` : '']
      .filter(Boolean)
      .join(', ');
    const text = r.resumed
      ? `run ${r.runId} of ${job.name}: ${r.pending} windows to do; ${again || (args['retry-failed'] ? 'no failed window to offer again' : 'nothing new queued')}`
      : `run ${r.runId}: ${job.name} on ${job.what.network}${r.head === null ? '' : `, head ${r.head}`}: ${r.queued} windows queued${r.skipped ? `, ${r.skipped} already in the lake` : ''}`;
    for (const v of r.voided ?? []) logger.log('warn', 'ledger.voided', voidedText(v, job.what.network), { ...v, network: job.what.network });
    logger.log('info', 'enqueue', text, { run: r.runId, job: job.name, ...r });
    process.stdout.write(
      `${JSON.stringify({ run: r.runId, job: job.name, resumed: r.resumed, head: r.head, queued: r.queued, retried: r.retried, skipped: r.skipped, pending: r.pending, requests: r.requests })}\n`,
    );
  },
};
