import type { DuckDBConnection } from '@duckdb/node-api';
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import type { DatasetDef } from '../datasets/dataset.js';
import { stagedSelect } from './commit.js';
import type { StagedPages } from './schema.js';
import { literal } from './sql.js';

/**
 * The typed rows of one commit batch, per dataset, written as each window completes: DuckDB types the
 * window's staged files on its own connection while the run goes on fetching, so that at commit time the rows
 * only need merging. Each window's rows go to an uncompressed Parquet file beside the staged files (which stay
 * the durable copy until the commit). Files, not tables of the in-memory database: appending to one table
 * per dataset made DuckDB checkpoint (compress) the growing tables again and again, which cost as much CPU
 * as the typing itself on the replay benchmark (2.5 s against 1.4 s), and tables held the whole batch in
 * memory until its commit.
 */
export class BatchRows {
  /** One queue of typings per loader connection; a window goes to the shorter. */
  private readonly chains: Promise<void>[];
  private readonly queued: number[];
  private failure: Error | undefined;
  private readonly files = new Map<string, string[]>();
  private written = 0;

  constructor(
    private readonly conns: readonly Promise<DuckDBConnection>[],
    /** A folder of its own under the run's staging folder. */
    private readonly dir: string,
    private readonly runId: string,
    private readonly ingestedAt: string,
    /** How many of the connections may take a window now (the first always). */
    private readonly usable: () => number = () => conns.length,
  ) {
    this.chains = conns.map(() => Promise.resolve());
    this.queued = conns.map(() => 0);
  }

  /** Queues the typing of a window's staged files. A failure is kept and thrown by `typedFiles` (the commit fails). */
  add(def: DatasetDef, stagedFiles: readonly string[], pageFiles: readonly StagedPages[]): void {
    if (stagedFiles.length === 0 && pageFiles.length === 0) return;
    const usable = this.queued.slice(0, this.usable());
    const i = usable.indexOf(Math.min(...usable));
    this.queued[i]!++;
    this.chains[i] = this.chains[i]!
      .then(async () => {
        if (this.failure) return;
        const select = stagedSelect(def, this.runId, this.ingestedAt, stagedFiles, pageFiles);
        await mkdir(this.dir, { recursive: true });
        const file = path.join(this.dir, `${this.written++}.parquet`);
        // Uncompressed: read back once, at the commit; compressing would cost more than the bytes it saves.
        await (await this.conns[i]!).run(`COPY (${select}) TO ${literal(file)} (FORMAT parquet, COMPRESSION uncompressed)`);
        this.files.set(def.name, [...(this.files.get(def.name) ?? []), file]);
      })
      .catch((e: unknown) => {
        this.failure ??= e as Error;
      })
      .finally(() => {
        this.queued[i]!--;
      });
  }

  /** The dataset's typed files once everything queued is in (none if it has no rows here). */
  async typedFiles(def: DatasetDef): Promise<string[]> {
    await Promise.all(this.chains);
    if (this.failure) throw this.failure;
    return this.files.get(def.name) ?? [];
  }

  /** Removes the batch's files (after its commit, or when it failed). */
  async drop(): Promise<void> {
    await Promise.all(this.chains);
    this.files.clear();
    await rm(this.dir, { recursive: true, force: true });
  }
}
