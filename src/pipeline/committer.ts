import { rm } from 'node:fs/promises';
import path from 'node:path';
import type { WatermarkRecord, WindowRecord } from '../load/catalog.js';
import type { CommittedFile } from '../load/commit.js';
import type { DuckDBConnection } from '@duckdb/node-api';
import { BatchRows } from '../load/batch-rows.js';
import { commitRun, type RunRecord } from '../load/commit-run.js';
import type { StagedPages } from '../load/schema.js';
import type { Engine } from '../load/engine.js';
import type { LakePaths } from '../load/paths.js';
import { watermarkKey } from '../load/state.js';
import type { WindowOutcome } from './execute.js';
import type { Logger } from './log.js';

export interface CommitPolicy {
  everyRows: number;
  everySeconds: number;
}

export interface CommitterContext {
  engine: Engine;
  paths: LakePaths;
  runId: string;
  ingestedAt: string;
  stagingDir: string;
  network: 'mainnet' | 'testnet';
  /** Watermarks as the run found them; advanced here as windows commit. */
  watermarks: Map<string, number>;
  /** The first block of the job's range: a scope without a watermark must start there to get one. */
  rangeStart: number;
  log: Logger;
  now: () => number;
}

/**
 * Commits finished windows in batches while other windows are still fetching: when enough rows are
 * staged or enough time has passed, and once at the end. Commits run one at a time, in order; a killed
 * run keeps every batch it committed, and the next run resumes from there.
 */
export class BatchCommitter {
  private pending: WindowOutcome[] = [];
  private pendingRows = 0;
  private lastCommitAt: number;
  private chain: Promise<void> = Promise.resolve();
  private batch = 0;
  private failure: Error | undefined;
  private loader: Promise<DuckDBConnection> | undefined;
  private readonly preloads = new Map<number, BatchRows>();
  readonly files: CommittedFile[] = [];
  readonly committed: WindowOutcome[] = [];

  constructor(
    private readonly ctx: CommitterContext,
    private readonly policy: CommitPolicy,
    private readonly windowRecord: (o: WindowOutcome) => WindowRecord,
    private readonly interimRecord: () => RunRecord,
  ) {
    this.lastCommitAt = ctx.now();
  }

  add(outcome: WindowOutcome): void {
    this.pending.push(outcome);
    if (!outcome.error) {
      const { stagedFiles, pageFiles } = stagedOf(outcome);
      this.rowsOf(this.batch).add(outcome.window.def, stagedFiles, pageFiles);
    }
    this.pendingRows += outcome.rows;
    const due = this.pendingRows >= this.policy.everyRows || this.ctx.now() - this.lastCommitAt >= this.policy.everySeconds * 1000;
    if (due && !this.failure) void this.enqueue(undefined).catch(() => undefined);
  }

  /** Commits what is left and records the run's final state. */
  async finish(finalRecord: (files: readonly CommittedFile[]) => RunRecord): Promise<void> {
    try {
      await this.enqueue(finalRecord);
    } finally {
      await Promise.all([...this.preloads.values()].map((b) => b.drop().catch(() => undefined)));
      this.preloads.clear();
      const loader = await this.loader?.catch(() => undefined);
      loader?.closeSync();
    }
  }

  /** The batch's rows typed as its windows complete, on a connection of their own (commits use the engine's). */
  private rowsOf(batch: number): BatchRows {
    let rows = this.preloads.get(batch);
    if (!rows) {
      this.loader ??= this.ctx.engine.instance.connect().then(async (c) => {
        await c.run("SET TimeZone = 'UTC'");
        return c;
      });
      rows = new BatchRows(this.loader, String(batch), this.ctx.runId, this.ctx.ingestedAt);
      this.preloads.set(batch, rows);
    }
    return rows;
  }

  private enqueue(finalRecord: ((files: readonly CommittedFile[]) => RunRecord) | undefined): Promise<void> {
    const batch = this.pending.splice(0);
    this.pendingRows = 0;
    this.lastCommitAt = this.ctx.now();
    const n = this.batch++;
    this.chain = this.chain.then(() => {
      if (this.failure) throw this.failure;
      return this.commit(batch, n, finalRecord).catch((e: Error) => {
        this.failure = e;
        throw e;
      });
    });
    return this.chain;
  }

  private watermarksOf(batch: readonly WindowOutcome[]): WatermarkRecord[] {
    const marks: WatermarkRecord[] = [];
    const ordered = batch.filter((o) => !o.error && o.window.range).sort((a, b) => a.window.range!.from - b.window.range!.from);
    for (const o of ordered) {
      const w = o.window;
      const key = watermarkKey(w.def.name, w.network, w.scopeKey);
      const old = this.ctx.watermarks.get(key);
      // A watermark promises that everything from the start up to it is in the lake: only a window that
      // continues the committed prefix may move it; one beyond a gap leaves it where it is.
      const contiguous = old === undefined ? w.range!.from <= this.ctx.rangeStart : w.range!.from <= old + 1;
      if (!contiguous || (old !== undefined && old >= w.range!.to)) continue;
      this.ctx.watermarks.set(key, w.range!.to);
      marks.push({ network: w.network, dataset: w.def.name, scope: w.scopeKey, block: w.range!.to });
    }
    return marks;
  }

  private async commit(batch: WindowOutcome[], n: number, finalRecord: ((files: readonly CommittedFile[]) => RunRecord) | undefined): Promise<void> {
    const { engine, paths, runId, ingestedAt, stagingDir, network, log } = this.ctx;
    const done = batch.filter((o) => !o.error);
    const defs = [...new Set(done.map((o) => o.window.def))];
    const started = Date.now();
    const files = await commitRun({
      engine,
      paths,
      runId,
      ingestedAt,
      stagingDir: path.join(stagingDir, `batch-${n}`),
      network,
      datasets: defs.map((def) => {
        const mine = done.filter((o) => o.window.def === def).map(stagedOf);
        return { def, stagedFiles: mine.flatMap((m) => m.stagedFiles), pageFiles: mine.flatMap((m) => m.pageFiles) };
      }),
      preloaded: this.preloads.get(n),
      rejectFiles: done.filter((o) => o.rejectStage).map((o) => o.rejectStage!.file),
      windows: batch.map(this.windowRecord),
      watermarks: this.watermarksOf(batch),
      run: (newFiles) => {
        this.files.push(...newFiles);
        return finalRecord ? finalRecord(this.files) : this.interimRecord();
      },
    });
    this.committed.push(...done);
    await this.preloads.get(n)?.drop();
    this.preloads.delete(n);
    const rows = done.reduce((a, o) => a + o.rows, 0);
    log.log('debug', 'commit', `commit ${n}: ${done.length} windows, ${rows} rows, ${files.length} files in ${Date.now() - started} ms`, {
      batch: n,
      windows: done.length,
      rows,
      files: files.length,
      ms: Date.now() - started,
    });
    // Staged rows are in the lake now; free the disk they took.
    await Promise.all(batch.flatMap((o) => [o.stage?.file, o.rejectStage?.file, o.pageStage?.file]).map((f) => (f ? rm(f, { force: true }) : undefined)));
  }
}

/** A completed window's non-empty staged files. */
function stagedOf(o: WindowOutcome): { stagedFiles: string[]; pageFiles: StagedPages[] } {
  return {
    stagedFiles: o.stage && o.stage.rows > 0 ? [o.stage.file] : [],
    pageFiles: o.pageStage && o.pageStage.rows > 0 ? [{ file: o.pageStage.file, entriesAt: o.pagesEntriesAt!, maxLineBytes: o.pageStage.maxLineBytes }] : [],
  };
}
