// Decoding inside an export run: the event logs the run writes are decoded into the datasets its job's
// `decode` key names, in a commit of their own after the run's last commit. A contract whose ABI the lake
// does not hold gets it from the API (#14).
//
// Each commit's event logs are decoded from the batch's typed files, which the commit has just read (reading
// the rows back from the lake's compressed day files cost about as much as decoding them): a batch committed
// while the run still fetches is decoded then, into files under the run's staging, and the final commit's
// decoding stays in the engine's tables for the decoded datasets' own commit. That is the same as decoding
// the lake's rows of the run only when every typed log landed: when a log came twice in the run (the lake
// keeps one of the two), or a decoding failed, the run decodes its rows read back from the lake instead, as
// `chainlake decode` does.

import type { DuckDBConnection } from '@duckdb/node-api';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { Accounting } from '../extract/accounting.js';
import type { ExplorerClient } from '../extract/explorer.js';
import type { Engine } from '../load/engine.js';
import type { LakePaths } from '../load/paths.js';
import { ident, literal, literalList } from '../load/sql.js';
import type { Job } from '../pipeline/job.js';
import type { Logger } from '../pipeline/log.js';
import type { RunReport } from '../pipeline/report.js';
import type { DecodedDataset } from './datasets.js';
import { decodeLogs, type DecodedFiles } from './decode.js';
import { decodeLake, type DecodeReport } from './lake.js';
import { resolveDatasets } from './spec.js';

export interface InRunContext {
  engine: Engine;
  paths: LakePaths;
  runId: string;
  ingestedAt: string;
  stagingDir: string;
  log: Logger;
  explorer?: ExplorerClient;
}

/** Decodes an export run's event logs as its commits land them (see the top of this file). */
export class RunDecoder {
  private datasets: DecodedDataset[] | undefined;
  private failure: Error | undefined;
  /** What the committed batches' decodings gave; `typed` counts every event_logs row they read. */
  private readonly decoded: DecodedFiles & { files: Map<string, string[]>; rejects: string[]; typed: number } = {
    files: new Map(),
    rejects: [],
    logs: 0,
    typed: 0,
  };
  private decodings = 0;

  constructor(
    private readonly job: Job,
    private readonly ctx: InRunContext,
  ) {}

  private fetchAbi(): ((address: string) => Promise<unknown>) | undefined {
    const explorer = this.ctx.explorer;
    return explorer
      ? async (address) => ((await explorer.get('contract_abi', `/v1/contracts/${address}/abi`, {}, new Accounting())) as { data?: unknown })?.data
      : undefined;
  }

  private resolve(conn: DuckDBConnection): Promise<DecodedDataset[]> {
    return resolveDatasets(this.job.decode!, { conn, paths: this.ctx.paths, network: this.job.network, fetchAbi: this.fetchAbi() });
  }

  /**
   * Resolves the datasets before the first window is fetched, when that does not depend on the run itself: a
   * contract's ABI read from the lake's contracts dataset, which this run also exports, is read after its
   * commits (the run then decodes after its last commit).
   */
  async start(): Promise<void> {
    const fromLake = this.job.decode!.contracts.some((c) => !c.signatures && !c.abiFile);
    if (fromLake && this.job.datasets.some((d) => d.name === 'contracts')) {
      this.failure = new Error('the ABIs come from this run');
      return;
    }
    try {
      this.datasets = await this.resolve(this.ctx.engine.conn);
    } catch (e) {
      // Reported once the export is done, by the decoding after it (which meets the same error).
      this.failure = e as Error;
    }
  }

  /**
   * Decodes the event logs of a commit's batches from their typed files (`logs`), once they are in the lake.
   * The final commit's decoding stays in the engine's tables, which the decoding after it merges; earlier
   * batches' (decoded while the run still fetches) go to files under the run's staging.
   */
  async committed(logs: readonly string[], final: boolean): Promise<void> {
    if (this.failure || !this.datasets || logs.length === 0) return;
    const conn = this.ctx.engine.conn;
    const k = this.decodings++;
    const dir = path.join(this.ctx.stagingDir, 'decoded', `${k}`);
    const prefix = final ? undefined : `__decode_b${k}_`;
    const from = `read_parquet(${literalList([...logs])})`;
    try {
      const typed = Number((await conn.runAndReadAll(`SELECT count(*)::BIGINT FROM ${from}`)).getRowsJS()[0]![0]);
      this.decoded.typed += typed;
      const { runId, ingestedAt } = this.ctx;
      const out = await decodeLogs({
        conn,
        logs: `SELECT * FROM ${from}`,
        datasets: this.datasets,
        runId,
        ingestedAt,
        workDir: path.join(dir, 'work'),
        prefix,
      });
      this.decoded.logs += out.logs;
      if (final) {
        this.decoded.tables = out;
        return;
      }
      try {
        // Uncompressed, like the typed files: read back once, after the last commit.
        const copy = async (table: string, to: string): Promise<string> => {
          await conn.run(`COPY ${table} TO ${literal(to)} (FORMAT parquet, COMPRESSION uncompressed)`);
          return to;
        };
        for (const [name, table] of out.tables) {
          if (!out.rows.get(name)) continue;
          const f = await copy(table, path.join(dir, `${name}.parquet`));
          this.decoded.files.set(name, [...(this.decoded.files.get(name) ?? []), f]);
        }
        if (out.rejectCount > 0) this.decoded.rejects.push(await copy(out.rejects, path.join(dir, '_rejects.parquet')));
      } finally {
        await conn.run([...out.tables.values(), out.rejects].map((t) => `DROP TABLE IF EXISTS ${ident(t)}`).join('; '));
      }
    } catch (e) {
      this.failure ??= e as Error;
    }
  }

  /** The committed batches' decodings, when they are what decoding the lake's rows of the run would give. */
  private decodedOfRun(report: RunReport): DecodedFiles | undefined {
    if (this.failure || !this.datasets) return undefined;
    // Every commit decodes its batches, so the typed rows decoded are those of the committed batches.
    const landed = report.datasets.find((d) => d.dataset === 'event_logs')?.landed ?? 0;
    if (this.decoded.typed !== landed) return undefined;
    return this.decoded;
  }

  /** Decodes the run's event logs into the decoded datasets; a failure is the report's error (the export stays committed). */
  async finish(report: RunReport): Promise<DecodeReport | undefined> {
    const ctx = this.ctx;
    const started = Date.now();
    try {
      const decoded = this.decodedOfRun(report);
      const datasets = decoded ? this.datasets! : await this.resolve(ctx.engine.conn);
      const r = await decodeLake({ ...ctx, network: this.job.network, datasets, onlyRunId: ctx.runId, decoded });
      ctx.log.log(
        'info',
        'decode.done',
        `decoded ${r.logs} logs in ${Date.now() - started} ms: ${r.datasets.map((d) => `${d.name} ${d.rows}`).join(', ')}${r.rejects ? `; ${r.rejects} rejects` : ''}`,
        { ...r, beside: decoded !== undefined },
      );
      return r;
    } catch (e) {
      const error = `decode: ${(e as Error).message}`;
      ctx.log.log('error', 'decode.failed', error, { error });
      report.errors.push({ window: 'decode', error });
      if (report.status === 'complete') report.status = 'partial';
      return undefined;
    } finally {
      await rm(path.join(ctx.stagingDir, 'decoded'), { recursive: true, force: true });
    }
  }
}
