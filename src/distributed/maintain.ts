/**
 * `chainlake maintain` for a distributed lake: expire old snapshots, delete the files no remaining snapshot
 * needs, and sweep the store of files nothing refers to (a fragment a worker wrote just before it died, the
 * partition files of a commit that never happened, fragments a committer died before removing). Orphans are
 * removed only once older than a grace period, so files a live worker or committer is writing right now stay.
 */
import path from 'node:path';
import { expireSnapshots, filesToDelete, forgetDeletedFiles } from '../ducklake/writer.js';
import { CONTROL_SCHEMA, openCatalog } from './control-plane.js';
import { openStore } from './store.js';

export interface MaintainOptions {
  catalog: string;
  store: string;
  /** Expire snapshots older than this (never the newest). */
  expireOlderThan?: Date;
  /** Keep only the newest N snapshots. */
  keepSnapshots?: number;
  /** Files nothing refers to are removed once older than this many seconds. */
  orphanGraceSeconds: number;
}

export interface MaintainReport {
  expiredSnapshots: number;
  deletedFiles: number;
  orphansRemoved: number;
  orphansKept: number;
}

export async function maintainLake(opts: MaintainOptions): Promise<MaintainReport> {
  const store = await openStore(opts.store);
  const { client, catalog } = await openCatalog(opts.catalog).catch(async (e: unknown) => {
    await store.close();
    throw e;
  });
  try {
    let expiredSnapshots = 0;
    if (opts.expireOlderThan || opts.keepSnapshots !== undefined) {
      expiredSnapshots = (await expireSnapshots(catalog, { olderThan: opts.expireOlderThan, keepLast: opts.keepSnapshots })).expired.length;
    }
    const scheduled = await filesToDelete(catalog, { dataPath: store.dataPath });
    for (const f of scheduled) await store.remove(f.path);
    await forgetDeletedFiles(catalog, scheduled);

    // What the control plane and the catalog refer to is read after listing the store: a file written after
    // the listing is not looked at, and one referred to by then is kept.
    const candidates = [...(await store.list('lake')), ...(await store.list('fragments'))];
    const referenced = new Set<string>();
    const fragments = await client.query(
      `SELECT fragment_path AS p FROM ${CONTROL_SCHEMA}.windows WHERE status = 'fetched' AND fragment_path IS NOT NULL
       UNION ALL SELECT reject_path FROM ${CONTROL_SCHEMA}.windows WHERE status = 'fetched' AND reject_path IS NOT NULL`,
    );
    for (const r of fragments.rows) referenced.add(norm(String(r.p)));
    const tables = await catalog.query(
      `SELECT t.table_id, s.path AS schema_path, t.path AS table_path FROM ducklake_table t JOIN ducklake_schema s ON s.schema_id = t.schema_id`,
    );
    const tablePaths = new Map(tables.map((t) => [Number(t.table_id), join(join(store.dataPath, String(t.schema_path)), String(t.table_path))]));
    for (const sql of [
      `SELECT table_id, path, path_is_relative FROM ducklake_data_file`,
      `SELECT table_id, path, path_is_relative FROM ducklake_delete_file`,
    ]) {
      for (const r of await catalog.query(sql)) {
        const base = tablePaths.get(Number(r.table_id)) ?? store.dataPath;
        referenced.add(norm(r.path_is_relative === false ? String(r.path) : join(base, String(r.path))));
      }
    }
    for (const r of await catalog.query(`SELECT path, path_is_relative FROM ducklake_files_scheduled_for_deletion`)) {
      referenced.add(norm(r.path_is_relative === false ? String(r.path) : join(store.dataPath, String(r.path))));
    }
    const cutoff = Date.now() - opts.orphanGraceSeconds * 1000;
    let orphansRemoved = 0;
    let orphansKept = 0;
    for (const file of candidates) {
      if (referenced.has(norm(file.location))) continue;
      if (file.modifiedMs > cutoff) {
        orphansKept++;
        continue;
      }
      await store.remove(file.location);
      orphansRemoved++;
    }
    await store.tidy();
    return { expiredSnapshots, deletedFiles: scheduled.length, orphansRemoved, orphansKept };
  } finally {
    await client.end().catch(() => undefined);
    await store.close();
  }
}

const join = (base: string, rel: string): string => (base.endsWith('/') ? base + rel : `${base}/${rel}`);
/** One spelling per file: object locations as they are, local paths resolved. */
const norm = (location: string): string => (/^s3:\/\//i.test(location) ? location : path.resolve(location));

/** `7d`, `12h`, `30m`, `45s` or plain seconds: a duration in seconds. */
export function parseDuration(text: string, flag: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*(d|h|m|s)?$/.exec(text.trim());
  if (!m) throw new Error(`${flag} ${text}: expected a duration such as 7d, 12h, 30m, 45s or seconds`);
  const unit = { d: 86_400, h: 3_600, m: 60, s: 1 }[(m[2] ?? 's') as 'd' | 'h' | 'm' | 's'];
  return Number(m[1]) * unit;
}
