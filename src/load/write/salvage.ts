import { existsSync } from 'node:fs';
import { rename } from 'node:fs/promises';
import { DuckDBInstance } from '../../ducklake/node-api.js';
import { isCatalogDamage } from '../catalog-damage.js';
import { verificationsDdl } from '../ledger/verifications.js';
import type { LakePaths } from '../paths.js';
import { literal } from '../sql.js';

/**
 * The catalog's tables a rebuild carries over, in order; `files` is always re-read from the lake's files. The
 * declared tables are kept so that decoded tables are rebuilt by their key. The
 * quota's usage is kept so that a rebuild does not hand the day's spent requests back; the requests so that `explain`
 * still traces the rows committed before it; the verifications so that a lake still says which windows were checked,
 * when and with what outcome.
 */
const KEPT_TABLES = ['lake_meta', 'declared_tables', 'runs', 'windows', 'watermarks', 'commits', 'request_usage', 'requests', 'verifications'] as const;

/** What each lost table costs the user, in the rebuild's words. */
const LOSS: Record<(typeof KEPT_TABLES)[number], string> = {
  lake_meta: 'the lake facts (rebuilt)',
  declared_tables:
    'the declarations of decoded and reconciliation tables (their folders are reported as unknown tables until a decode or reconcile declares them again)',
  runs: 'the run history (`status` shows no earlier runs)',
  windows: 'the window records (resume and gap reports start afresh)',
  watermarks: "the watermarks (the next incremental runs start from the job's fromBlock and fetch again; merging keeps one row per key)",
  commits: 'the commit log',
  request_usage: "the daily request usage (the job's dailyRequestQuota counts today's requests afresh)",
  requests: 'the request lineage (`explain` cannot trace the rows committed before the rebuild)',
  verifications: 'the verification history (`chainlake verify` again checks and records the windows)',
};

/** Tables a new catalog gets only once used (the verifications, at the first open for writing): made here when kept. */
const MADE_WHEN_KEPT: Partial<Record<(typeof KEPT_TABLES)[number], string>> = { verifications: verificationsDdl('') };

export interface SalvageReport {
  /** Why the catalog was set aside: 'missing', or DuckDB's message. */
  problem: string;
  /** Where the damaged file was moved (kept for inspection), when there was one. */
  damagedCopy?: string;
  kept: { table: string; rows: number }[];
  lost: { table: string; what: string; error: string }[];
}

/**
 * Checks the whole catalog file reads back: every block of every table (DuckDB verifies a block's checksum
 * when it reads it). Returns DuckDB's complaint, or undefined when the file is sound.
 */
export async function catalogProblem(paths: LakePaths): Promise<string | undefined> {
  if (!existsSync(paths.catalog)) return 'missing';
  let instance: DuckDBInstance | undefined;
  try {
    instance = await DuckDBInstance.create(':memory:', { autoinstall_known_extensions: 'false' });
    const conn = await instance.connect();
    try {
      await conn.run(`ATTACH ${literal(paths.catalog)} AS old (READ_ONLY)`);
      const tables = (await conn.runAndReadAll(`SELECT table_name FROM duckdb_tables() WHERE database_name = 'old'`)).getRowsJS().map((r) => String(r[0]));
      for (const t of tables) await conn.runAndReadAll(`SELECT * FROM old.main."${t}"`);
      return undefined;
    } finally {
      conn.closeSync();
    }
  } catch (e) {
    if (isCatalogDamage(e)) return (e as Error).message;
    throw e;
  } finally {
    instance?.closeSync();
  }
}

/**
 * Sets a damaged catalog aside and starts a new one with every table that still reads whole. Runs under the
 * lake's lock, before anything else opens the catalog; the caller then re-reads the files and the views.
 */
export async function salvageCatalog(paths: LakePaths, problem: string, createTables: string[]): Promise<SalvageReport> {
  const report: SalvageReport = { problem, kept: [], lost: [] };
  if (problem === 'missing') {
    for (const t of KEPT_TABLES) if (t !== 'lake_meta') report.lost.push({ table: t, what: LOSS[t], error: 'no catalog.duckdb' });
    return report;
  }
  const stamp = new Date()
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z');
  const damaged = `${paths.catalog}.damaged-${stamp}`;
  await rename(paths.catalog, damaged);
  if (existsSync(`${paths.catalog}.wal`)) await rename(`${paths.catalog}.wal`, `${damaged}.wal`);
  report.damagedCopy = damaged;
  const instance = await DuckDBInstance.create(':memory:', { autoinstall_known_extensions: 'false' });
  const conn = await instance.connect();
  try {
    await conn.run(`ATTACH ${literal(paths.catalog)} AS fresh`);
    await conn.run('USE fresh');
    for (const sql of createTables) await conn.run(sql);
    let attached = true;
    try {
      await conn.run(`ATTACH ${literal(damaged)} AS old (READ_ONLY)`);
    } catch (e) {
      attached = false;
      if (!isCatalogDamage(e)) throw e;
      for (const t of KEPT_TABLES) if (t !== 'lake_meta') report.lost.push({ table: t, what: LOSS[t], error: 'the file does not open' });
    }
    if (attached) {
      // Tables the damaged file declares; when even that list does not read, every table is tried.
      const present = await conn
        .runAndReadAll(`SELECT table_name FROM duckdb_tables() WHERE database_name = 'old'`)
        .then((r) => new Set(r.getRowsJS().map((row) => String(row[0]))))
        .catch(() => new Set<string>(KEPT_TABLES));
      for (const t of KEPT_TABLES) {
        // A catalog older than a table has nothing of it to keep or lose.
        if (!present.has(t) && t !== 'lake_meta') continue;
        try {
          await conn.run('BEGIN TRANSACTION');
          if (MADE_WHEN_KEPT[t]) await conn.run(MADE_WHEN_KEPT[t]);
          await conn.run(`INSERT INTO fresh.main.${t} BY NAME SELECT * FROM old.main.${t}`);
          const n = Number((await conn.runAndReadAll(`SELECT count(*) FROM fresh.main.${t}`)).getRowsJS()[0]![0]);
          await conn.run('COMMIT');
          report.kept.push({ table: t, rows: n });
        } catch (e) {
          await conn.run('ROLLBACK').catch(() => undefined);
          if (t !== 'lake_meta') report.lost.push({ table: t, what: LOSS[t], error: (e as Error).message });
        }
      }
      await conn.run('DETACH old');
    }
    await conn.run('USE memory');
    await conn.run('DETACH fresh');
  } finally {
    conn.closeSync();
    instance.closeSync();
  }
  return report;
}
