import type { DuckDBConnection } from '@duckdb/node-api';
import type { DatasetDef } from '../datasets/dataset.js';
import { stagedSelect } from './commit.js';
import type { StagedPages } from './schema.js';
import { ident } from './sql.js';

/**
 * The typed rows of one commit batch, per dataset, loaded from each window's staged files as soon as the
 * window completes. DuckDB types them on its own threads while the run goes on fetching, so that at commit
 * time the rows are ready to merge. The staged files stay the durable copy until the commit: these tables
 * live in the run's in-memory database (spilling to its temp folder) and die with it.
 */
export class BatchRows {
  private chain: Promise<void> = Promise.resolve();
  private failure: Error | undefined;
  private readonly tables = new Map<string, string>();

  constructor(
    private readonly conn: Promise<DuckDBConnection>,
    private readonly tag: string,
    private readonly runId: string,
    private readonly ingestedAt: string,
  ) {}

  /** Queues the typing of a window's staged files. A failure is kept and thrown by `table` (the commit fails). */
  add(def: DatasetDef, stagedFiles: readonly string[], pageFiles: readonly StagedPages[]): void {
    if (stagedFiles.length === 0 && pageFiles.length === 0) return;
    this.chain = this.chain
      .then(async () => {
        if (this.failure) return;
        const select = stagedSelect(def, this.runId, this.ingestedAt, stagedFiles, pageFiles);
        const table = this.tables.get(def.name);
        if (table) {
          await (await this.conn).run(`INSERT INTO ${table} BY NAME ${select}`);
        } else {
          const name = ident(`__chainlake_batch_${this.tag}_${def.name}`);
          await (await this.conn).run(`CREATE OR REPLACE TABLE ${name} AS ${select}`);
          this.tables.set(def.name, name);
        }
      })
      .catch((e: unknown) => {
        this.failure = e as Error;
      });
  }

  /** The table holding the dataset's typed rows once everything queued is in, or undefined if it has none. */
  async table(def: DatasetDef): Promise<string | undefined> {
    await this.chain;
    if (this.failure) throw this.failure;
    return this.tables.get(def.name);
  }

  /** Drops the batch's tables (after its commit, or when it failed). */
  async drop(): Promise<void> {
    await this.chain;
    if (this.tables.size === 0) return;
    const conn = await this.conn;
    for (const t of this.tables.values()) await conn.run(`DROP TABLE IF EXISTS ${t}`);
    this.tables.clear();
  }
}
