import type { CommandModule } from 'yargs';
import { checkCatalogUrl, connect } from '../../distributed/control-plane.js';
import { DEFAULT_QUEUE_SETTINGS } from '../../distributed/queue.js';
import { DEFAULT_COMMIT_ROWS, DEFAULT_COMMIT_SECONDS, DEFAULT_LEASE_SECONDS, queueState, runWorker, type WorkerReport } from '../../distributed/worker.js';
import { serveMetrics, type MetricsServer } from '../../observe/server.js';
import { WorkerMetrics } from '../../observe/worker-metrics.js';
import { lakeReportHtml } from '../../report/report.js';
import { ChainlakeError } from '../../errors.js';
import type { Logger } from '../../pipeline/log.js';
import { exitCodeOf, outputFor, withDistributedOptions } from '../common.js';
import { CliError } from '../exit-codes.js';
import type { StoreConnection } from '../../distributed/store.js';
import { distributedFlags } from '../lake-target.js';

interface Args {
  catalog?: string;
  store?: string;
  id?: string;
  account: string;
  'until-idle'?: boolean;
  'poll-ms': number;
  'lease-seconds': number;
  'supervise-seconds': number;
  'commit-rows': number;
  'commit-seconds': number;
  'metrics-port'?: number;
  'metrics-host': string;
  'log-format'?: 'text' | 'json';
  quiet?: boolean;
  verbose?: boolean;
}

const positiveInteger = (flag: string, value: number, min = 1): number => {
  if (!Number.isInteger(value) || value < min) throw new CliError(`${flag}: expected a whole number of at least ${min}, got ${String(value)}`);
  return value;
};

/** The catalog and store (flag or environment) and every number yargs cannot check, or a usage error naming the flag. */
function checkedFlags(args: Args): { catalog: string; store: string; storeConnection: StoreConnection; port: number | undefined } {
  const { catalog: catalogFlag, store, storeConnection } = distributedFlags(args);
  const catalog = checkCatalogUrl(catalogFlag);
  if (!store)
    throw new CliError('--store is required', 'CHAINLAKE_USAGE', 'give --store /shared/lake (or set CHAINLAKE_STORE): the directory every worker mounts');
  positiveInteger('--poll-ms', args['poll-ms']);
  positiveInteger('--lease-seconds', args['lease-seconds'], 5);
  positiveInteger('--supervise-seconds', args['supervise-seconds']);
  positiveInteger('--commit-rows', args['commit-rows']);
  positiveInteger('--commit-seconds', args['commit-seconds']);
  const port = args['metrics-port'];
  if (port !== undefined && (!Number.isInteger(port) || port < 0 || port > 65535))
    throw new CliError(`--metrics-port: expected a port number from 0 to 65535, got ${String(port)}`);
  return { catalog, store, storeConnection, port };
}

/** The worker's metrics (the queue read from the control plane), served with /healthz and /report. */
interface ServedMetrics {
  metrics: WorkerMetrics;
  close(): Promise<void>;
}

async function startMetrics(
  catalog: string,
  store: string,
  storeConnection: StoreConnection,
  port: number,
  host: string,
  logger: Logger,
): Promise<ServedMetrics> {
  const client = await connect(catalog);
  const metrics = new WorkerMetrics(() => queueState(client));
  let server: MetricsServer;
  try {
    // The lake's page as `chainlake report --catalog` writes it, read when asked (what the committer last committed).
    const report = () => lakeReportHtml({ kind: 'distributed', catalog, store, storeConnection });
    server = await serveMetrics(metrics, { host, port, pages: { '/report': report } });
  } catch (e) {
    await client.end().catch(() => undefined);
    throw new CliError(`--metrics-port ${port} on ${host}: ${(e as Error).message}`);
  }
  logger.log('info', 'worker.metrics', `serving ${server.url}/metrics, ${server.url}/healthz and ${server.url}/report`, { url: server.url });
  return {
    metrics,
    async close() {
      await server.close();
      await client.end().catch(() => undefined);
    },
  };
}

/** A drained worker's exit code, as a single-machine run's: a setup problem that failed every window is a usage error. */
function drainedExitCode(report: WorkerReport): number {
  if (report.setupProblem) {
    throw new ChainlakeError(`every window worker ${report.worker} took failed: ${report.setupProblem.problem}`, {
      code: 'CHAINLAKE_USAGE',
      hint: report.setupProblem.hint,
    });
  }
  // A window fails "in strict mode" only under a strict job: the errors alone say whether that was all.
  return exitCodeOf(report, true);
}

export const workerCommand: CommandModule<object, Args> = {
  command: 'worker',
  describe: 'Distributed mode: fetch queued windows into the shared lake, and commit them while holding the committer lease',
  builder: (y) =>
    withDistributedOptions(y)
      .option('id', { type: 'string', describe: 'Name of this worker in the control plane (default: host-pid-random)' })
      .option('account', {
        type: 'string',
        default: process.env.CHAINLAKE_ACCOUNT || 'default',
        defaultDescription: '$CHAINLAKE_ACCOUNT or default',
        describe:
          "The API account this worker's key (CHAINLAKE_API_KEY) belongs to: workers of one account take turns, so its rate limit and daily quota hold; workers of different accounts fetch side by side",
      })
      .option('until-idle', { type: 'boolean', describe: 'Exit once no run has anything left to fetch or commit (batch use); default: run until stopped' })
      .option('poll-ms', { type: 'number', default: 1000, describe: 'How long an idle worker waits before asking the queue again' })
      .option('lease-seconds', {
        type: 'number',
        default: DEFAULT_LEASE_SECONDS,
        describe: 'How long the committer lease lasts without renewal: how long a dead committer holds up commits',
      })
      .option('supervise-seconds', {
        type: 'number',
        default: DEFAULT_QUEUE_SETTINGS.superviseSeconds,
        describe: "How often this worker looks for windows whose worker died (past their enqueue's --window-timeout) to offer them again",
      })
      .option('commit-rows', { type: 'number', default: DEFAULT_COMMIT_ROWS, describe: 'Fetched rows (all workers) after which the lease holder commits' })
      .option('commit-seconds', {
        type: 'number',
        default: DEFAULT_COMMIT_SECONDS,
        describe: 'The longest a fetched window waits for its commit while workers keep fetching',
      })
      .option('metrics-port', {
        type: 'number',
        describe: 'Serve /metrics (Prometheus), /healthz and /report (the distributed lake as `chainlake report` draws it) on this port (0 picks a free one)',
      })
      .option('metrics-host', { type: 'string', default: '127.0.0.1', describe: 'Interface for --metrics-port' })
      .example('$0 worker --catalog postgres://chainlake@db/lake --store /mnt/lake', 'Work until stopped (SIGTERM finishes the window in hand)')
      .example('$0 worker --until-idle --metrics-port 9464', 'Drain the queue, serving metrics and /report meanwhile; catalog and store from the environment'),
  handler: async (args) => {
    const { catalog, store, storeConnection, port } = checkedFlags(args);
    const { logger } = outputFor(args);
    const stop = new AbortController();
    const onSignal = (sig: NodeJS.Signals) => {
      logger.log('info', 'worker.stopping', `${sig}: finishing the window in hand, then stopping`);
      stop.abort();
    };
    for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, onSignal);
    let served: ServedMetrics | undefined;
    try {
      served = port === undefined ? undefined : await startMetrics(catalog, store, storeConnection, port, args['metrics-host'], logger);
      const report = await runWorker({
        catalog,
        store,
        storeConnection,
        id: args.id,
        account: args.account,
        untilIdle: args['until-idle'],
        pollMs: args['poll-ms'],
        leaseSeconds: args['lease-seconds'],
        commitRows: args['commit-rows'],
        commitSeconds: args['commit-seconds'],
        queue: { superviseSeconds: args['supervise-seconds'] },
        signal: stop.signal,
        log: logger,
        metrics: served?.metrics,
        env: process.env,
      });
      // Drained (--until-idle): the exit code says what became of the windows it took, as a single-machine run's does.
      // A worker stopped by a signal exits 0: what it did not finish is offered to the others.
      if (args['until-idle'] && !stop.signal.aborted) process.exitCode = drainedExitCode(report);
    } finally {
      await served?.close();
      // On every way out, a setup error too: a worker run in a longer-lived process (a test, a library caller)
      // leaves no handler behind to swallow that process's own SIGINT or SIGTERM.
      for (const sig of ['SIGINT', 'SIGTERM'] as const) process.removeListener(sig, onSignal);
    }
  },
};
