import { readdir } from 'node:fs/promises';
import type { DatasetDef } from '../datasets/dataset.js';
import type { CommittedFile } from './commit.js';
import { REJECTS_DATASET } from './commit.js';
import type { Engine } from './engine.js';
import type { LakePaths } from './paths.js';
import { lakeColumns } from './schema.js';
import { ident, literal } from './sql.js';

const ALIAS = 'chainlake_catalog';

const TABLES = [
  `CREATE TABLE IF NOT EXISTS runs (run_id VARCHAR PRIMARY KEY, job VARCHAR, started_at TIMESTAMPTZ, finished_at TIMESTAMPTZ, status VARCHAR, report JSON)`,
  `CREATE TABLE IF NOT EXISTS windows (run_id VARCHAR, dataset VARCHAR, network VARCHAR, scope VARCHAR, from_block BIGINT, to_block BIGINT,
     rows_expected BIGINT, rows_got BIGINT, rejects BIGINT, requests BIGINT, retries BIGINT, throttles BIGINT, cap_hits BIGINT, splits BIGINT,
     status VARCHAR, error VARCHAR, committed_at TIMESTAMPTZ)`,
  `CREATE TABLE IF NOT EXISTS files (path VARCHAR PRIMARY KEY, dataset VARCHAR, network VARCHAR, "partition" VARCHAR, rows BIGINT, bytes BIGINT,
     min_block BIGINT, max_block BIGINT, run_id VARCHAR, written_at TIMESTAMPTZ)`,
  `CREATE TABLE IF NOT EXISTS watermarks (network VARCHAR, dataset VARCHAR, scope VARCHAR, block BIGINT, run_id VARCHAR, updated_at TIMESTAMPTZ,
     PRIMARY KEY (network, dataset, scope))`,
];

export interface WindowRecord {
  runId: string;
  dataset: string;
  network: string;
  scope: string;
  fromBlock: number | null;
  toBlock: number | null;
  rowsExpected: number;
  rowsGot: number;
  rejects: number;
  requests: number;
  retries: number;
  throttles: number;
  capHits: number;
  splits: number;
  status: 'committed' | 'failed';
  error: string | null;
}

export interface WatermarkRecord {
  network: string;
  dataset: string;
  scope: string;
  block: number;
}

const num = (n: number | null): string => (n === null ? 'NULL' : String(n));
const str = (s: string | null): string => (s === null ? 'NULL' : literal(s));

/**
 * `<lake>/catalog.duckdb`: a view per dataset (with column comments) and the run bookkeeping. The run
 * attaches it only for the moment of a write, so users can keep querying the lake in between.
 */
export class Catalog {
  private constructor(private readonly engine: Engine) {}

  /** Attaches the catalog, runs `fn` inside one transaction, detaches. */
  static async write<T>(engine: Engine, paths: LakePaths, fn: (c: Catalog) => Promise<T>): Promise<T> {
    const conn = engine.conn;
    await conn.run(`ATTACH ${literal(paths.catalog)} AS ${ALIAS}`);
    try {
      await conn.run(`USE ${ALIAS}`);
      for (const t of TABLES) await conn.run(t);
      await conn.run('BEGIN TRANSACTION');
      try {
        const result = await fn(new Catalog(engine));
        await conn.run('COMMIT');
        return result;
      } catch (e) {
        await conn.run('ROLLBACK');
        throw e;
      }
    } finally {
      await conn.run('USE memory');
      await conn.run(`DETACH ${ALIAS}`);
    }
  }

  private run(sql: string): Promise<unknown> {
    return this.engine.conn.run(sql);
  }

  async recordRun(runId: string, job: string, startedAt: string, finishedAt: string | null, status: string, report: unknown): Promise<void> {
    await this.run(
      `INSERT OR REPLACE INTO runs VALUES (${literal(runId)}, ${literal(job)}, ${literal(startedAt)}, ${finishedAt ? literal(finishedAt) : 'NULL'}, ${literal(status)}, ${literal(JSON.stringify(report ?? null))})`,
    );
  }

  async recordWindows(windows: readonly WindowRecord[]): Promise<void> {
    if (windows.length === 0) return;
    const rows = windows.map(
      (w) =>
        `(${literal(w.runId)}, ${literal(w.dataset)}, ${literal(w.network)}, ${literal(w.scope)}, ${num(w.fromBlock)}, ${num(w.toBlock)}, ${w.rowsExpected}, ${w.rowsGot}, ${w.rejects}, ${w.requests}, ${w.retries}, ${w.throttles}, ${w.capHits}, ${w.splits}, ${literal(w.status)}, ${str(w.error)}, now())`,
    );
    await this.run(`INSERT INTO windows VALUES ${rows.join(', ')}`);
  }

  async recordFiles(runId: string, files: readonly CommittedFile[]): Promise<void> {
    if (files.length === 0) return;
    const rows = files.map(
      (f) =>
        `(${literal(f.path)}, ${literal(f.dataset)}, ${literal(f.network)}, ${literal(f.partition)}, ${f.rows}, ${f.bytes}, ${num(f.minBlock)}, ${num(f.maxBlock)}, ${literal(runId)}, now())`,
    );
    await this.run(`INSERT OR REPLACE INTO files VALUES ${rows.join(', ')}`);
  }

  async advanceWatermarks(runId: string, marks: readonly WatermarkRecord[]): Promise<void> {
    for (const m of marks) {
      await this.run(
        `INSERT INTO watermarks VALUES (${literal(m.network)}, ${literal(m.dataset)}, ${literal(m.scope)}, ${m.block}, ${literal(runId)}, now())
         ON CONFLICT (network, dataset, scope) DO UPDATE SET block = greatest(watermarks.block, excluded.block), run_id = excluded.run_id, updated_at = excluded.updated_at`,
      );
    }
  }

  /** (Re)creates the view of each dataset that has files, with the declarations' docs as comments. */
  async refreshViews(paths: LakePaths, defs: readonly DatasetDef[]): Promise<void> {
    for (const def of defs) {
      if (!(await hasFiles(paths, def.name))) continue;
      await this.run(
        `CREATE OR REPLACE VIEW ${ident(def.name)} AS SELECT * FROM read_parquet(${literal(paths.datasetGlob(def.name))}, hive_partitioning = true, union_by_name = true, hive_types = {'network': 'VARCHAR', ${literal(def.partition)}: 'DATE'})`,
      );
      await this.run(
        `COMMENT ON VIEW ${ident(def.name)} IS ${literal(`${def.doc} Natural key: (${def.naturalKey.join(', ')}). Partitioned by network, ${def.partition}.`)}`,
      );
      for (const c of lakeColumns(def)) await this.run(`COMMENT ON COLUMN ${ident(def.name)}.${ident(c.name)} IS ${literal(c.doc)}`);
      await this.run(`COMMENT ON COLUMN ${ident(def.name)}.network IS 'Network: mainnet or testnet (Hive partition).'`);
      const what =
        def.partition === 'block_date'
          ? 'UTC date of the block'
          : def.partition === 'snapshot_date'
            ? 'UTC date of the run that took the snapshot'
            : 'UTC date of the data point';
      await this.run(`COMMENT ON COLUMN ${ident(def.name)}.${ident(def.partition)} IS ${literal(`${what} (Hive partition).`)}`);
    }
    if (await hasFiles(paths, REJECTS_DATASET)) {
      await this.run(
        `CREATE OR REPLACE VIEW ${REJECTS_DATASET} AS SELECT * FROM read_parquet(${literal(paths.datasetGlob(REJECTS_DATASET))}, hive_partitioning = true, union_by_name = true, hive_types = {'network': 'VARCHAR', 'run_date': 'DATE'})`,
      );
      await this.run(`COMMENT ON VIEW ${REJECTS_DATASET} IS 'Rows that did not convert: dataset, window, field, raw value, reason and the whole API entry.'`);
    }
  }
}

async function hasFiles(paths: LakePaths, dataset: string): Promise<boolean> {
  try {
    for (const net of await readdir(paths.datasetDir(dataset))) {
      for (const part of await readdir(`${paths.datasetDir(dataset)}/${net}`).catch(() => [])) {
        const files = await readdir(`${paths.datasetDir(dataset)}/${net}/${part}`).catch(() => []);
        if (files.some((f) => f.endsWith('.parquet'))) return true;
      }
    }
  } catch {
    return false;
  }
  return false;
}
