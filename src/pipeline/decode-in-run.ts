// Decoding inside an export run: the event logs the run writes are decoded into the datasets its job's
// `decode` key names. A contract whose ABI the lake does not hold gets it from the API (#14).
//
// Each commit decodes its own event logs from its merge and writes the decoded days in the same journal
// (decode/in-commit.ts): the decoded datasets land with the logs they come from, and reading the rows back
// from the lake's compressed day files, which cost about as much as decoding them, is not needed. When that
// cannot be done (the ABIs come from the run's own contracts dataset) or a commit's decoding failed, the run
// decodes its rows read back from the lake after its last commit instead, as `chainlake decode` does.

import { COMMIT_ATTEMPTS } from '../ducklake/conflicts.js';
import { Accounting } from '../extract/accounting.js';
import type { ExplorerClient } from '../extract/explorer.js';
import type { Engine } from '../load/engine.js';
import type { LakePaths } from '../load/paths.js';
import type { JobWhat } from './job.js';
import type { Logger } from './log.js';
import type { RunReport } from './report.js';
import type { DecodedDataset } from '../decode/datasets.js';
import { CommitDecoding } from '../decode/in-commit.js';
import { decodeLake, skippedList, skippedText, type DecodeReport } from '../decode/lake.js';
import { resolveDatasets } from '../decode/spec.js';
import { chainlakeCodeOf } from '../errors.js';

export interface InRunContext {
  engine: Engine;
  paths: LakePaths;
  runId: string;
  ingestedAt: string;
  stagingDir: string;
  log: Logger;
  explorer?: ExplorerClient;
  /** The run's requests outside its windows: an ABI asked of the API counts in its report, as the head pin does. */
  acct?: Accounting;
}

/** A contract's ABI as the API gives it (explorer #14), for resolveDatasets; its requests counted in `acct`. */
export const abiFromApi =
  (explorer: ExplorerClient, acct = new Accounting()) =>
  async (address: string): Promise<unknown> =>
    ((await explorer.get('contract_abi', `/v1/contracts/${address}/abi`, {}, acct)) as { data?: unknown })?.data;

/** Decodes an export run's event logs as its commits land them (see the top of this file). */
export class RunDecoder {
  private datasets: DecodedDataset[] | undefined;
  private failure: Error | undefined;
  /** What the commits' decodings gave (see committed). */
  private readonly totals: DecodeReport & { partitions: Map<string, Set<string>>; skippedBy: Map<string, number> } = {
    logs: 0,
    datasets: [],
    rejects: 0,
    skipped: [],
    files: 0,
    partitions: new Map(),
    skippedBy: new Map(),
  };

  constructor(
    private readonly what: JobWhat,
    private readonly ctx: InRunContext,
  ) {}

  private fetchAbi(): ((address: string) => Promise<unknown>) | undefined {
    return this.ctx.explorer ? abiFromApi(this.ctx.explorer, this.ctx.acct) : undefined;
  }

  private resolve(): Promise<DecodedDataset[]> {
    return resolveDatasets(this.what.decode!, { engine: this.ctx.engine, paths: this.ctx.paths, network: this.what.network, fetchAbi: this.fetchAbi() });
  }

  /**
   * Resolves the datasets before the first window is fetched, when that does not depend on the run itself: a
   * contract's ABI read from the lake's contracts dataset, which this run also exports, is read after its
   * commits (the run then decodes after its last commit).
   */
  async start(): Promise<void> {
    const fromLake = this.what.decode!.contracts.some((c) => !c.signatures && !c.abiFile);
    if (fromLake && this.what.datasets.some((d) => d.name === 'contracts')) {
      this.failure = new Error('the ABIs come from this run');
      return;
    }
    try {
      this.datasets = await this.resolve();
    } catch (e) {
      // Reported once the export is done, by the decoding after it (which meets the same error).
      this.failure = e as Error;
    }
  }

  /**
   * The decoding of one commit's event logs, in the commit itself; none once the datasets are unknown or a
   * decoding failed (the run then decodes after its last commit).
   */
  forCommit(workDir: string): CommitDecoding | undefined {
    if (this.failure || !this.datasets) return undefined;
    const { engine, paths, runId, ingestedAt } = this.ctx;
    return new CommitDecoding({ engine, paths, network: this.what.network, datasets: this.datasets, runId, ingestedAt, workDir });
  }

  /** After a commit that carried `decoding`: what it landed counts, and a failure sends the run to decoding after its last commit. */
  async committed(decoding: CommitDecoding, applied: boolean): Promise<void> {
    try {
      if (decoding.failure) {
        this.failure ??= decoding.failure;
        const error = decoding.failure.message;
        this.ctx.log.log('warn', 'decode.deferred', `decoding in the commit failed (${error}): the run decodes its logs after its last commit`, { error });
      } else if (applied) {
        const t = this.totals;
        t.logs += decoding.stats.logs;
        t.rejects += decoding.stats.rejects;
        for (const [shape, n] of decoding.stats.skipped) t.skippedBy.set(shape, (t.skippedBy.get(shape) ?? 0) + n);
        t.files += decoding.stats.files;
        for (const [name, rows] of decoding.stats.rows) {
          const r = t.datasets.find((x) => x.name === name);
          if (r) r.rows += rows;
          else t.datasets.push({ name, rows, partitions: 0 });
        }
        for (const [name, days] of decoding.stats.partitions) {
          const all = t.partitions.get(name) ?? new Set<string>();
          for (const p of days) all.add(p);
          t.partitions.set(name, all);
        }
      }
    } finally {
      await decoding.close();
    }
  }

  /** The report of the commits' decodings: every dataset asked for, in the order asked. */
  private inCommits(): DecodeReport {
    const t = this.totals;
    const names = [...new Set(this.datasets!.map((d) => d.name))];
    return {
      logs: t.logs,
      datasets: names.map((name) => ({ name, rows: t.datasets.find((x) => x.name === name)?.rows ?? 0, partitions: t.partitions.get(name)?.size ?? 0 })),
      rejects: t.rejects,
      skipped: skippedList(t.skippedBy),
      files: t.files,
    };
  }

  /** Decodes the run's event logs into the decoded datasets; a failure is the report's error (the export stays committed). */
  async finish(report: RunReport): Promise<DecodeReport | undefined> {
    const ctx = this.ctx;
    const started = Date.now();
    try {
      const beside = !this.failure && this.datasets !== undefined;
      const r = beside
        ? this.inCommits()
        : await decodeLake({
            ...ctx,
            network: this.what.network,
            datasets: this.datasets ?? (await this.resolve()),
            // The kept windows it committed are decoded too: their rows carry the run that fetched them.
            onlyRunIds: [ctx.runId, ...(report.fromKept?.runs ?? [])],
            again: (error, next) =>
              ctx.log.log('warn', 'decode.lake_changed', `decode: ${error.message}; decoding again from the new rows (attempt ${next} of ${COMMIT_ATTEMPTS})`, {
                snapshot: error.later[0]!.snapshotId,
                attempt: next,
              }),
          });
      ctx.log.log(
        'info',
        'decode.done',
        `decoded ${r.logs} logs${beside ? ' in the commits' : ` in ${Date.now() - started} ms`}: ${r.datasets.map((d) => `${d.name} ${d.rows}`).join(', ')}${r.rejects ? `; ${r.rejects} rejects` : ''}${r.skipped.length ? `; ${skippedText(r.skipped)}` : ''}`,
        { ...r, beside },
      );
      return r;
    } catch (e) {
      const error = `decode: ${(e as Error).message}`;
      ctx.log.log('error', 'decode.failed', error, { error });
      report.errors.push({ window: 'decode', error, code: chainlakeCodeOf(e) });
      if (report.status === 'complete') report.status = 'partial';
      return undefined;
    }
  }
}
