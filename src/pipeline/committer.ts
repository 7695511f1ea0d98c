import type { DuckDBConnection } from '@duckdb/node-api';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import type { WindowRecord } from '../load/catalog.js';
import { advanceWatermark, type WatermarkRecord } from '../load/ledger/watermarks.js';
import type { CommittedFile } from '../load/write/commit.js';
import { BatchRows, Loaders } from '../load/write/batch-rows.js';
import { commitRun, type CommitDerivation, type RunCommitInput, type RunRecord } from '../load/write/commit-run.js';
import { COMMIT_ATTEMPTS } from '../ducklake/conflicts.js';
import { preparedAgain } from '../load/write/journal.js';
import type { Engine } from '../load/engine.js';
import type { LakePaths } from '../load/paths.js';
import { watermarkKey } from '../load/state.js';
import { collectGarbage } from './garbage.js';
import type { BlockRange } from '../extract/pager.js';
import { stagedOf, type WindowOutcome } from './execute.js';
import { isProvisional } from './plan.js';
import type { KeptWindowKey } from '../load/write/journal.js';
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
  /**
   * The windows the run starts, per dataset name (a window cut at its rows is continued by the next: see
   * WindowOutcome.rest). A dataset none of whose windows is still to come is complete: a batch commits it
   * without holding it back (see BatchCommitter.take). Without it every dataset counts as complete.
   */
  windowsPerDataset?: ReadonlyMap<string, number>;
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
 *
 * A batch holds back the windows of a dataset that still has windows to come, within the policy's bounds (see
 * take): a run's windows span a scope's whole block range (joined windows), so the next batch of that dataset
 * would touch the same day partitions again and rewrite every row this one wrote (docs/performance.md, "Commits").
 */
export class BatchCommitter {
  /** Finished windows not yet queued for a commit, per dataset name, in the order they finished. */
  private readonly pending = new Map<string, PendingDataset>();
  private lastCommitAt: number;
  private chain: Promise<void> = Promise.resolve();
  private batch = 0;
  private typedBatches = 0;
  private failure: Error | undefined;
  /** The commit queued last, until the chain reaches it (see enqueue). */
  private waiting: QueuedCommit | undefined;
  /** False once every window is in: a batch committed after that has the machine to itself. */
  private fetching = true;
  private loaders: Loaders | undefined;
  /** Typed rows not yet dropped: those of pending windows and of queued commits. */
  private readonly typed = new Set<BatchRows>();
  /** Per dataset name: its windows not yet finished (started or not), while the run fetches. */
  private readonly open = new Map<string, number>();
  /** Per watermark key: committed ranges not yet joined to the watermark (a gap lies below them). */
  private readonly ahead = new Map<string, BlockRange[]>();
  readonly files: CommittedFile[] = [];
  /** Every window handed to the committer, and those of them a commit landed (see notCommitted). */
  private readonly handed: WindowOutcome[] = [];
  private readonly landed = new Set<WindowOutcome>();

  constructor(
    private readonly ctx: CommitterContext,
    private readonly policy: CommitPolicy,
    private readonly windowRecord: (o: WindowOutcome) => WindowRecord,
    private readonly interimRecord: () => RunRecord,
  ) {
    this.lastCommitAt = ctx.now();
    for (const [key, ranges] of ctx.committedRanges ?? []) this.ahead.set(key, [...ranges]);
    for (const [name, n] of ctx.windowsPerDataset ?? []) this.open.set(name, n);
  }

  add(outcome: WindowOutcome): void {
    this.handed.push(outcome);
    const name = outcome.window.def.name;
    // A window cut at its rows is continued by the next window of its scope, in the same slot (run.ts fetchWindows).
    if (!(outcome.rest && !outcome.error) && this.open.has(name)) this.open.set(name, this.open.get(name)! - 1);
    let ds = this.pending.get(name);
    if (!ds) {
      ds = { outcomes: [], rows: 0, since: this.ctx.now(), typed: this.rowsOf() };
      this.pending.set(name, ds);
    }
    ds.outcomes.push(outcome);
    ds.rows += outcome.rows;
    if (!outcome.error) {
      const { stagedFiles, pageFiles } = stagedOf(outcome);
      ds.typed.add(outcome.window.def, stagedFiles, pageFiles, outcome.kept);
    }
    const rows = [...this.pending.values()].reduce((a, d) => a + d.rows, 0);
    const due = rows >= this.policy.everyRows || this.ctx.now() - this.lastCommitAt >= this.policy.everySeconds * 1000;
    if (due && !this.failure) {
      const taken = this.take();
      if (taken.length > 0) void this.enqueue(taken, undefined).catch(() => undefined);
    }
  }

  /**
   * The pending datasets a due batch commits: each complete one (no window of it still to come), each one whose
   * first pending window finished a commit period ago, and then, largest first, held-back ones until what stays
   * pending is below the policy's rows. So a kill loses at most about twice what the policy allows, and a dataset
   * still fetching is committed once, when its last window is in, where a batch of the moment would have written
   * its day partitions and the next batch read and written them all again.
   */
  private take(): string[] {
    const now = this.ctx.now();
    const held: [string, number][] = [];
    const taken: string[] = [];
    for (const [name, ds] of this.pending) {
      const complete = (this.open.get(name) ?? 0) <= 0;
      if (complete || now - ds.since >= this.policy.everySeconds * 1000) taken.push(name);
      else held.push([name, ds.rows]);
    }
    held.sort((a, b) => b[1] - a[1]);
    let heldRows = held.reduce((a, [, n]) => a + n, 0);
    for (const [name, n] of held) {
      if (heldRows < this.policy.everyRows) break;
      taken.push(name);
      heldRows -= n;
    }
    return taken;
  }

  /**
   * The windows handed to the committer that no commit landed (failed ones included: their failure is recorded by a
   * commit too): after a failed commit, what the run keeps for the next (pipeline/kept.ts) or the next fetches again.
   */
  notCommitted(): WindowOutcome[] {
    return this.handed.filter((o) => !this.landed.has(o));
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
      await this.enqueue([...this.pending.keys()], finalRecord);
    } finally {
      await Promise.all([...this.typed].map((b) => b.drop().catch(() => undefined)));
      this.typed.clear();
      await this.loaders?.close();
    }
  }

  /**
   * A pending dataset's rows typed as its windows complete, on connections of their own (commits use others). Two,
   * each typing one window at a time on one thread: the replay bench's windows came in faster than one
   * typed them, and its event loop needed well under a core.
   */
  private rowsOf(): BatchRows {
    this.loaders ??= new Loaders(
      Array.from({ length: LOADERS }, () =>
        this.ctx.engine.connect().then(async (c) => {
          // While windows fetch, DuckDB runs each query on one thread: the event loop keeps its core.
          await this.oneThread(c);
          return c;
        }),
      ),
    );
    const rows = new BatchRows(this.loaders, path.join(this.ctx.stagingDir, 'typed', `batch-${this.typedBatches++}`), this.ctx.runId, this.ctx.ingestedAt);
    this.typed.add(rows);
    return rows;
  }

  /**
   * Queues a commit of the pending windows of `datasets`. The final commit also takes over a batch still waiting
   * for its turn (that batch's commit is then skipped): a run's end pays for one commit, not two
   * (docs/performance.md, "Commits").
   */
  private enqueue(datasets: readonly string[], finalRecord: ((files: readonly CommittedFile[]) => RunRecord) | undefined): Promise<void> {
    const taken = datasets.map((name) => this.pending.get(name)!);
    for (const name of datasets) this.pending.delete(name);
    let batch = taken.flatMap((d) => d.outcomes);
    let rows = taken.map((d) => d.typed);
    this.lastCommitAt = this.ctx.now();
    const n = this.batch++;
    const waiting = this.waiting;
    if (finalRecord && waiting && !waiting.started) {
      waiting.skipped = true;
      batch = [...waiting.batch, ...batch];
      rows = [...waiting.rows, ...rows];
    }
    const slot: QueuedCommit = { batch, rows, n, started: false, skipped: false };
    this.waiting = slot;
    this.chain = this.chain.then(async () => {
      slot.started = true;
      if (slot.skipped) return;
      if (this.failure) throw this.failure;
      // The batch's own windows are typed first; no typing runs beside the commit itself (see Loaders). One
      // typing beside a background commit had kept windows finishing meanwhile from queueing up, but DuckDB's
      // memory is shared: with it the 5M-row export peaked higher, for no speed beyond the bench's spread
      // (docs/performance.md, "Commits").
      await Promise.all(slot.rows.map((r) => r.settled()));
      await this.loaders?.hold(0);
      return this.commit(slot.batch, slot.rows, slot.n, finalRecord)
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
    preloaded: readonly BatchRows[],
    n: number,
    finalRecord: ((files: readonly CommittedFile[]) => RunRecord) | undefined,
  ): Promise<void> {
    const done = batch.filter((o) => !o.error);
    const started = Date.now();
    const background = await this.setCommitThreads(finalRecord);
    const files = await this.commitBatch(batch, done, preloaded, n, finalRecord, background);
    for (const o of batch) this.landed.add(o);
    await this.dropPreloaded(preloaded);
    this.logCommit(n, done, files, started);
    // A commit runs hundreds of statements, and each result's DuckDB memory (outside DuckDB's pool, so no
    // memory limit counts it) is freed only when V8 collects the result's small object. Once fetching is over
    // JavaScript allocates too little for V8 to collect, so the results of one commit after another stayed
    // resident (docs/performance.md, "Commits' results").
    collectGarbage();
    // Staged rows are in the lake now; free the disk they took.
    await removeStaged(batch);
  }

  /**
   * A batch committed while windows still fetch runs in the background: one file writer and one dataset at a time,
   * so that the event loop keeps a core and requests keep their pace (with both cores taken by a commit, the rate
   * benchmark fell short: docs/performance.md, "Commits"). Once fetching is over, commits take every writer: a batch
   * queued in the background but started after the last window ran slowly on one writer where nothing else was left
   * to run. Every commit runs each DuckDB query on one thread: its parallelism is its connections (the writers, two
   * datasets at once), and a scheduler thread beside them cost CPU-seconds and wall time (docs/performance.md,
   * "Commits"). Returns whether this commit runs in the background.
   */
  private async setCommitThreads(finalRecord: ((files: readonly CommittedFile[]) => RunRecord) | undefined): Promise<boolean> {
    await this.oneThread(this.ctx.engine.conn);
    return finalRecord === undefined && this.fetching;
  }

  /**
   * DuckDB on one thread, set only on an engine opened with more (a run's is opened with one): each `SET threads`
   * restarts DuckDB's scheduler and flushes its allocator (a `malloc_trim` of the whole process).
   */
  private async oneThread(conn: DuckDBConnection): Promise<void> {
    if (this.ctx.engine.threads > 1) await conn.run('SET threads = 1');
  }

  /**
   * The batch's rows, rejects, windows, watermarks, run record and decoded rows, committed as one snapshot; prepared
   * again (in a work folder of its own) when another DuckLake writer changed a table it replaces meanwhile.
   */
  private async commitBatch(
    batch: WindowOutcome[],
    done: readonly WindowOutcome[],
    preloaded: readonly BatchRows[],
    n: number,
    finalRecord: ((files: readonly CommittedFile[]) => RunRecord) | undefined,
    background: boolean,
  ): Promise<CommittedFile[]> {
    // Computed once: the watermarks advance the committer's own state. A window an earlier run kept stays that run's
    // row, moved to committed by the commit (journal.ts `kept`); a failed one is this run's.
    const windows = batch.filter((o) => !o.kept || o.error).map(this.windowRecord);
    const kept = batch.flatMap((o) =>
      o.kept && !o.error ? [{ runId: o.kept.runId, windowId: o.window.id, provisional: isProvisional(o.window), requestLog: o.kept.requestLog }] : [],
    );
    const watermarks = this.watermarksOf(batch);
    return preparedAgain(
      (attempt) => path.join(this.ctx.stagingDir, attempt === 1 ? `batch-${n}` : `batch-${n}-${attempt}`),
      // The staged rows stay for the next attempt.
      (workDir) => this.commitOnce(done, preloaded, workDir, { windows, kept, watermarks }, finalRecord, background),
      {
        again: (error, next) =>
          this.ctx.log.log(
            'warn',
            'commit.lake_changed',
            `commit ${n}: ${error.message}; preparing it again from the new rows (attempt ${next} of ${COMMIT_ATTEMPTS})`,
            { batch: n, snapshot: error.later[0]!.snapshotId, attempt: next },
          ),
      },
    );
  }

  /** One attempt of commitBatch, in `workDir`. */
  private async commitOnce(
    done: readonly WindowOutcome[],
    preloaded: readonly BatchRows[],
    workDir: string,
    records: { windows: WindowRecord[]; kept: KeptWindowKey[]; watermarks: WatermarkRecord[] },
    finalRecord: ((files: readonly CommittedFile[]) => RunRecord) | undefined,
    background: boolean,
  ): Promise<CommittedFile[]> {
    const { engine, paths, runId, ingestedAt, network } = this.ctx;
    const decoding = this.ctx.decoder?.forCommit(path.join(workDir, 'decoded'));
    let applied = false;
    return commitRun({
      engine,
      paths,
      runId,
      ingestedAt,
      stagingDir: workDir,
      network,
      datasets: batchDatasets(done),
      preloaded,
      writers: background ? 1 : undefined,
      // On one thread a second dataset side by side gains nothing but holds a second merge in memory.
      datasetsAtOnce: background ? 1 : undefined,
      sliceRows: this.ctx.mergeSliceRows,
      rejectFiles: done.filter((o) => o.rejectStage).map((o) => o.rejectStage!.file),
      ...records,
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
  }

  /** Frees the typed rows the commit took from the loaders. */
  private async dropPreloaded(preloaded: readonly BatchRows[]): Promise<void> {
    for (const rows of preloaded) {
      await rows.drop();
      this.typed.delete(rows);
    }
  }

  private logCommit(n: number, done: readonly WindowOutcome[], files: readonly CommittedFile[], started: number): void {
    const rows = done.reduce((a, o) => a + o.rows, 0);
    this.ctx.log.log('info', 'commit', `commit ${n}: ${done.length} windows, ${rows} rows, ${files.length} files in ${Date.now() - started} ms`, {
      batch: n,
      windows: done.length,
      rows,
      files: files.length,
      ms: Date.now() - started,
    });
  }
}

/** A batch's datasets as a commit takes them: each one's staged files, and its windows fetched again. */
function batchDatasets(done: readonly WindowOutcome[]): RunCommitInput['datasets'] {
  return [...new Set(done.map((o) => o.window.def))].map((def) => {
    const windows = done.filter((o) => o.window.def === def);
    const mine = windows.map(stagedOf);
    const replacing = windows.flatMap(({ window: w }) =>
      w.replaces && w.range ? [{ endpoint: w.endpoint, scope: w.scope, range: w.range, ...(w.times ? { times: w.times } : {}) }] : [],
    );
    return { def, stagedFiles: mine.flatMap((m) => m.stagedFiles), pageFiles: mine.flatMap((m) => m.pageFiles), replacing };
  });
}

/** Removes a committed batch's staged files (rows, rejects, pages as received). */
async function removeStaged(batch: readonly WindowOutcome[]): Promise<void> {
  await Promise.all(
    batch
      .flatMap((o) => [o.stage?.file, o.rejectStage?.file, ...(o.pageStage?.files.map((f) => f.file) ?? [])])
      .map((f) => (f ? rm(f, { force: true }) : undefined)),
  );
}

/** Connections typing finished windows while the run fetches (see rowsOf). */
const LOADERS = 2;

/** A dataset's finished windows waiting for a commit, and their typed rows. */
interface PendingDataset {
  outcomes: WindowOutcome[];
  rows: number;
  /** When its first window finished. */
  since: number;
  typed: BatchRows;
}

/** A commit in the chain: its windows and their typed rows. */
interface QueuedCommit {
  batch: WindowOutcome[];
  rows: BatchRows[];
  n: number;
  started: boolean;
  /** Taken over by the final commit before its turn came. */
  skipped: boolean;
}
