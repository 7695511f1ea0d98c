import { rm } from 'node:fs/promises';
import path from 'node:path';
import type { WindowRecord } from '../load/catalog.js';
import { advanceWatermark, type WatermarkRecord } from '../load/ledger/watermarks.js';
import type { CommittedFile } from '../load/write/commit.js';
import { BatchRows, Loaders } from '../load/write/batch-rows.js';
import { commitRun, type CommitDerivation, type RunRecord } from '../load/write/commit-run.js';
import type { Engine } from '../load/engine.js';
import type { LakePaths } from '../load/paths.js';
import { watermarkKey } from '../load/state.js';
import { collectGarbage } from './garbage.js';
import type { BlockRange } from '../extract/pager.js';
import { stagedOf, type WindowOutcome } from './execute.js';
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
  /**
   * Block ranges already in the lake beyond the watermarks, per watermark key: what the run being resumed
   * committed. A watermark advances through them once the gap below them is committed.
   */
  committedRanges?: ReadonlyMap<string, readonly BlockRange[]>;
  log: Logger;
  now: () => number;
  /** See RunOptions.mergeSliceRows. */
  mergeSliceRows?: number;
  /** Decodes each commit's event logs in the commit itself (pipeline/decode-in-run.ts). */
  decoder?: CommitDecoder;
}

/** Gives each commit the decoding of its event logs, and hears how the commit went. */
export interface CommitDecoder<D extends CommitDerivation = CommitDerivation> {
  forCommit(workDir: string): D | undefined;
  committed(decoding: D, applied: boolean): Promise<void>;
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
  /** The commit queued last, until the chain reaches it (see enqueue). */
  private waiting: QueuedCommit | undefined;
  /** False once every window is in: a batch committed after that has the machine to itself. */
  private fetching = true;
  private loaders: Loaders | undefined;
  private readonly preloads = new Map<number, BatchRows>();
  /** Per watermark key: committed ranges not yet joined to the watermark (a gap lies below them). */
  private readonly ahead = new Map<string, BlockRange[]>();
  readonly files: CommittedFile[] = [];

  constructor(
    private readonly ctx: CommitterContext,
    private readonly policy: CommitPolicy,
    private readonly windowRecord: (o: WindowOutcome) => WindowRecord,
    private readonly interimRecord: () => RunRecord,
  ) {
    this.lastCommitAt = ctx.now();
    for (const [key, ranges] of ctx.committedRanges ?? []) this.ahead.set(key, [...ranges]);
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

  /**
   * Commits what is left and records the run's final state. An interrupted run ends here too: every window
   * it fetched is committed (the batches queued, then the pending windows), each commit crash-safe as any.
   */
  async finish(finalRecord: (files: readonly CommittedFile[]) => RunRecord): Promise<void> {
    this.fetching = false;
    // What the fetching left behind is garbage now, and nothing in JavaScript would collect it before the run
    // ends: the commits still queued run in DuckDB (see collectGarbage).
    collectGarbage({ release: true });
    try {
      await this.enqueue(finalRecord);
    } finally {
      await Promise.all([...this.preloads.values()].map((b) => b.drop().catch(() => undefined)));
      this.preloads.clear();
      await this.loaders?.close();
    }
  }

  /**
   * The batch's rows typed as its windows complete, on connections of their own (commits use others). Two,
   * each typing one window at a time on one thread: the replay bench's windows came in faster than one
   * typed them, and its event loop needed well under a core.
   */
  private rowsOf(batch: number): BatchRows {
    let rows = this.preloads.get(batch);
    if (!rows) {
      this.loaders ??= new Loaders(
        Array.from({ length: LOADERS }, () =>
          this.ctx.engine.connect().then(async (c) => {
            // While windows fetch, DuckDB runs each query on one thread: the event loop keeps its core.
            await c.run('SET threads = 1');
            return c;
          }),
        ),
      );
      rows = new BatchRows(this.loaders, path.join(this.ctx.stagingDir, 'typed', `batch-${batch}`), this.ctx.runId, this.ctx.ingestedAt);
      this.preloads.set(batch, rows);
    }
    return rows;
  }

  /**
   * Queues a commit of the windows pending now. The final commit also takes over a batch still waiting for
   * its turn (that batch's commit is then skipped): a run's end pays for one commit, not two (docs/performance.md,
   * "Commits").
   */
  private enqueue(finalRecord: ((files: readonly CommittedFile[]) => RunRecord) | undefined): Promise<void> {
    let batch = this.pending.splice(0);
    this.pendingRows = 0;
    this.lastCommitAt = this.ctx.now();
    const ns = [this.batch++];
    const waiting = this.waiting;
    if (finalRecord && waiting && !waiting.started) {
      waiting.skipped = true;
      batch = [...waiting.batch, ...batch];
      ns.unshift(...waiting.ns);
    }
    const slot: QueuedCommit = { batch, ns, started: false, skipped: false };
    this.waiting = slot;
    this.chain = this.chain.then(async () => {
      slot.started = true;
      if (slot.skipped) return;
      if (this.failure) throw this.failure;
      // The batch's own windows are typed first; no typing runs beside the commit itself (see Loaders). One
      // typing beside a background commit had kept windows finishing meanwhile from queueing up, but DuckDB's
      // memory is shared: with it the 5M-row export peaked higher, for no speed beyond the bench's spread
      // (docs/performance.md, "Commits").
      await Promise.all(slot.ns.map((i) => this.preloads.get(i)?.settled()));
      await this.loaders?.hold(0);
      return this.commit(slot.batch, slot.ns, finalRecord)
        .catch((e: Error) => {
          this.failure = e;
          throw e;
        })
        .finally(() => {
          this.loaders?.release();
        });
    });
    return this.chain;
  }

  /**
   * The watermarks this batch moves. A watermark promises that everything from the job's first block up to
   * it is in the lake, so it moves only through committed ranges that continue the committed prefix. Windows
   * finish out of order (chunk 2 may commit a batch before chunk 1): a range beyond a gap is kept, and the
   * batch that fills the gap moves the watermark through it too.
   */
  private watermarksOf(batch: readonly WindowOutcome[]): WatermarkRecord[] {
    const touched = new Map<string, WindowOutcome['window']>();
    for (const o of batch) {
      if (o.error || !o.window.range) continue;
      const w = o.window;
      const key = watermarkKey(w.def.name, w.network, w.scopeKey);
      const list = this.ahead.get(key) ?? [];
      list.push(w.range!);
      this.ahead.set(key, list);
      touched.set(key, w);
    }
    const marks: WatermarkRecord[] = [];
    for (const [key, w] of touched) {
      const old = this.ctx.watermarks.get(key);
      const { mark, rest } = advanceWatermark(old, this.ctx.rangeStart, this.ahead.get(key)!, w.final);
      this.ahead.set(key, rest);
      if (mark === undefined || (old !== undefined && mark <= old)) continue;
      this.ctx.watermarks.set(key, mark);
      marks.push({ network: w.network, dataset: w.def.name, scope: w.scopeKey, block: mark });
    }
    return marks;
  }

  private async commit(
    batch: WindowOutcome[],
    ns: readonly number[],
    finalRecord: ((files: readonly CommittedFile[]) => RunRecord) | undefined,
  ): Promise<void> {
    const n = ns[ns.length - 1]!;
    const preloaded = ns.map((i) => this.preloads.get(i)).filter((b): b is BatchRows => b !== undefined);
    const { engine, paths, runId, ingestedAt, stagingDir, network, log } = this.ctx;
    const done = batch.filter((o) => !o.error);
    const defs = [...new Set(done.map((o) => o.window.def))];
    const started = Date.now();
    // A batch committed while windows still fetch runs in the background: one DuckDB thread and one file
    // writer, so that the event loop keeps a core and requests keep their pace (with both cores taken by
    // a commit, the rate benchmark fell short: docs/performance.md, "Commits"). Once fetching is over, commits
    // take all: a batch queued in the background but started after the last window ran slowly on one thread
    // where nothing else was left to run.
    const background = finalRecord === undefined && this.fetching;
    await engine.conn.run(`SET threads = ${background ? 1 : engine.threads}`);
    const workDir = path.join(stagingDir, `batch-${n}`);
    const decoding = this.ctx.decoder?.forCommit(path.join(workDir, 'decoded'));
    let applied = false;
    const files = await commitRun({
      engine,
      paths,
      runId,
      ingestedAt,
      stagingDir: workDir,
      network,
      datasets: defs.map((def) => {
        const windows = done.filter((o) => o.window.def === def);
        const mine = windows.map(stagedOf);
        const replacing = windows.flatMap(({ window: w }) =>
          w.replaces && w.range ? [{ endpoint: w.endpoint, scope: w.scope, range: w.range, ...(w.times ? { times: w.times } : {}) }] : [],
        );
        return { def, stagedFiles: mine.flatMap((m) => m.stagedFiles), pageFiles: mine.flatMap((m) => m.pageFiles), replacing };
      }),
      preloaded,
      writers: background ? 1 : undefined,
      // On one thread a second dataset side by side gains nothing but holds a second merge in memory.
      datasetsAtOnce: background ? 1 : undefined,
      sliceRows: this.ctx.mergeSliceRows,
      rejectFiles: done.filter((o) => o.rejectStage).map((o) => o.rejectStage!.file),
      windows: batch.map(this.windowRecord),
      watermarks: this.watermarksOf(batch),
      run: (newFiles) => {
        this.files.push(...newFiles);
        return finalRecord ? finalRecord(this.files) : this.interimRecord();
      },
      derivation: decoding,
    })
      .then((f) => {
        applied = true;
        return f;
      })
      .finally(() => (decoding ? this.ctx.decoder!.committed(decoding, applied) : undefined));
    for (const i of ns) {
      await this.preloads.get(i)?.drop();
      this.preloads.delete(i);
    }
    const rows = done.reduce((a, o) => a + o.rows, 0);
    log.log('info', 'commit', `commit ${n}: ${done.length} windows, ${rows} rows, ${files.length} files in ${Date.now() - started} ms`, {
      batch: n,
      windows: done.length,
      rows,
      files: files.length,
      ms: Date.now() - started,
    });
    // A commit runs hundreds of statements, and each result's DuckDB memory (outside DuckDB's pool, so no
    // memory limit counts it) is freed only when V8 collects the result's small object. Once fetching is over
    // JavaScript allocates too little for V8 to collect, so the results of one commit after another stayed
    // resident (docs/performance.md, "Commits' results").
    collectGarbage();
    // Staged rows are in the lake now; free the disk they took.
    await Promise.all(
      batch
        .flatMap((o) => [o.stage?.file, o.rejectStage?.file, ...(o.pageStage?.files.map((f) => f.file) ?? [])])
        .map((f) => (f ? rm(f, { force: true }) : undefined)),
    );
  }
}

/** Connections typing finished windows while the run fetches (see rowsOf). */
const LOADERS = 2;

/** A commit in the chain: its windows and the batches their rows were typed in. */
interface QueuedCommit {
  batch: WindowOutcome[];
  ns: number[];
  started: boolean;
  /** Taken over by the final commit before its turn came. */
  skipped: boolean;
}
