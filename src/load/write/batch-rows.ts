import type { DuckDBConnection } from '@duckdb/node-api';
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import type { DatasetDef } from '../../datasets/dataset.js';
import { stagedSelect, type StagedPages } from '../schema.js';
import { literal } from '../sql.js';

/**
 * Rows per row group of a typed file. The writer holds a whole row group in DuckDB's memory, and with
 * DuckDB's default (122,880 rows) large windows had typings hold so much that a merge beside them ran DuckDB
 * out of memory in a 5M-row export, where groups of 16,384 rows finished (docs/performance.md, "DuckDB's memory").
 */
export const TYPED_ROW_GROUP_ROWS = 16_384;

/**
 * The connections that type finished windows while the run fetches, each running one typing at a time; a
 * typing goes to the least busy of those allowed to take work. A commit holds them all (see
 * BatchCommitter.enqueue) and waits for what they started: DuckDB's memory is shared, and a typing beside a
 * merge once failed the run for memory (and later raised its peak): that typing read a whole window's pages
 * from one file in one buffer; small page files (load/write/staging.ts PageFiles) bound it now
 * (docs/performance.md, "Page files").
 */
export class Loaders {
  private readonly tails: Promise<void>[];
  private readonly queued: number[];
  /** How many connections (the first ones) take new typings; 0 holds them until `release`. */
  private allowed: number;
  private gate: Promise<void> = Promise.resolve();
  private open: () => void = () => undefined;

  constructor(private readonly conns: readonly Promise<DuckDBConnection>[]) {
    this.tails = conns.map(() => Promise.resolve());
    this.queued = conns.map(() => 0);
    this.allowed = conns.length;
  }

  /** Queues `task` on a connection (once typings are not held); the returned promise settles with it. */
  async run(task: (conn: DuckDBConnection) => Promise<void>): Promise<void> {
    // Checked again after each wait, in the same turn as the dispatch: a hold that began meanwhile applies.
    while (this.allowed === 0) await this.gate;
    const open = this.queued.slice(0, this.allowed);
    const i = open.indexOf(Math.min(...open));
    this.queued[i]!++;
    const done = this.tails[i]!.then(async () => task(await this.conns[i]!)).finally(() => {
      this.queued[i]!--;
    });
    this.tails[i] = done.catch(() => undefined);
    return done;
  }

  /**
   * From now on only the first `keep` connections take typings (with 0, none: they wait for `release`);
   * resolves once the other connections have ended what they started or had queued.
   */
  async hold(keep: number): Promise<void> {
    if (keep === 0 && this.allowed !== 0) this.gate = new Promise((resolve) => (this.open = resolve));
    this.allowed = keep;
    await Promise.all(this.tails.slice(keep));
  }

  release(): void {
    this.allowed = this.conns.length;
    this.open();
  }

  async close(): Promise<void> {
    this.release();
    await Promise.all(this.tails);
    for (const c of this.conns) (await c.catch(() => undefined))?.closeSync();
  }
}

/**
 * The typed rows of one commit batch, per dataset, written as each window completes: DuckDB types the
 * window's staged files on its own connection while the run goes on fetching, so that at commit time the rows
 * only need merging. Each window's rows go to an uncompressed Parquet file beside the staged files (which stay
 * the durable copy until the commit). Files, not tables of the in-memory database: appending to one table
 * per dataset made DuckDB checkpoint (compress) the growing tables again and again, which cost as much CPU
 * as the typing itself on the replay benchmark (docs/performance.md, "Commits"), and tables held the whole batch in
 * memory until its commit.
 */
export class BatchRows {
  private readonly typings: Promise<void>[] = [];
  private failure: Error | undefined;
  private readonly files = new Map<string, string[]>();
  private written = 0;

  constructor(
    private readonly loaders: Loaders,
    /** A folder of its own under the run's staging folder. */
    private readonly dir: string,
    private readonly runId: string,
    private readonly ingestedAt: string,
  ) {}

  /**
   * Queues the typing of a window's staged files. A failure is kept and thrown by `typedFiles` (the commit fails).
   * `fetchedBy`: the run that fetched them and when, when not this one (a window an earlier run kept: its rows name
   * that run, whose `requests` rows trace them).
   */
  add(def: DatasetDef, stagedFiles: readonly string[], pageFiles: readonly StagedPages[], fetchedBy?: { runId: string; ingestedAt: string }): void {
    if (stagedFiles.length === 0 && pageFiles.length === 0) return;
    const typing = this.loaders
      .run(async (conn) => {
        if (this.failure) return;
        const select = stagedSelect(def, fetchedBy?.runId ?? this.runId, fetchedBy?.ingestedAt ?? this.ingestedAt, stagedFiles, pageFiles);
        await mkdir(this.dir, { recursive: true });
        const file = path.join(this.dir, `${this.written++}.parquet`);
        // Uncompressed: read back once, at the commit; compressing would cost more than the bytes it saves.
        await conn.run(`COPY (${select}) TO ${literal(file)} (FORMAT parquet, COMPRESSION uncompressed, ROW_GROUP_SIZE ${TYPED_ROW_GROUP_ROWS})`);
        this.files.set(def.name, [...(this.files.get(def.name) ?? []), file]);
      })
      .catch((e: unknown) => {
        this.failure ??= e as Error;
      });
    this.typings.push(typing);
  }

  /** Resolves once every typing queued so far has ended (failed or not). */
  async settled(): Promise<void> {
    await Promise.all(this.typings);
  }

  /** The dataset's typed files once everything queued is in (none if it has no rows here). */
  async typedFiles(def: DatasetDef): Promise<string[]> {
    await Promise.all(this.typings);
    if (this.failure) throw this.failure;
    return this.files.get(def.name) ?? [];
  }

  /** Removes the batch's files (after its commit, or when it failed). */
  async drop(): Promise<void> {
    await Promise.all(this.typings);
    this.files.clear();
    await rm(this.dir, { recursive: true, force: true });
  }
}
