import { existsSync } from 'node:fs';
import type { CommandModule } from 'yargs';
import { rebuildCatalog } from '../../load/write/maintenance.js';
import { LakePaths } from '../../load/paths.js';
import { rebuildDistributedCatalog, type DistributedRebuildReport } from '../../distributed/rebuild.js';
import { checkCatalogUrl } from '../../distributed/control-plane.js';
import { CliError, EXIT } from '../exit-codes.js';
import { resolveLakeTarget, withLakeOptions } from '../lake-target.js';

interface Args {
  action: 'rebuild';
  lake?: string;
  catalog?: string;
  store?: string;
  format: 'text' | 'json';
  'forget-missing': boolean;
}

/** How many of a long list a text report names before it says how many more there are. */
const NAMED = 20;

function listed<T>(items: readonly T[], line: (item: T) => string): string {
  return (
    items
      .slice(0, NAMED)
      .map((i) => `  ${line(i)}\n`)
      .join('') + (items.length > NAMED ? `  … and ${items.length - NAMED} more (--format json lists all)\n` : '')
  );
}

/** The distributed rebuild's report for a person: what was re-created, what was found and what to do about each. */
export function formatDistributedRebuild(r: DistributedRebuildReport): string {
  let out = `catalog rebuild of the distributed lake ${r.catalog}${r.store ? ` (store ${r.store})` : ''}\n`;
  if (r.catalogMissing) {
    return (
      out +
      `LOST: the database has no DuckLake catalog (schema ducklake): no table of the lake can be read. Restore the database from its backup; ` +
      `none was created in its place.\n` +
      (r.orphans.length
        ? `the store holds ${r.orphans.length} lake file(s) that no catalog names now: do NOT run chainlake maintain --catalog before the catalog is restored (it would delete them)\n`
        : '') +
      `NOT WHOLE: exit ${EXIT.differs}\n`
    );
  }
  const recreated = [
    ...r.recreatedTables.map((t) => `table ${t} (its rows were lost)`),
    ...r.recreatedColumns.map((c) => `column ${c} (NULL in existing rows)`),
  ];
  out += recreated.length ? `re-created in the control plane:\n${listed(recreated, (x) => x)}` : 'control plane: every table and column is there\n';
  if (r.recreatedLakeTables.length) out += `re-created (empty) in the lake: ${r.recreatedLakeTables.join(', ')}\n`;
  for (const l of r.lostTables) {
    out +=
      `LOST: ${l.windows} window(s) of ${l.dataset} (${l.rows} rows, runs ${l.runs.join(', ')}) say committed, but the lake has no table ${l.dataset}: ` +
      `their rows are not in the lake; restore the database from its backup, or fetch them again: ${r.recreatedLakeTables.includes(l.dataset) ? 'its watermarks are deleted, so the next `chainlake enqueue` of the job plans its whole range' : 'run catalog rebuild again, then the next `chainlake enqueue` of the job'}\n`;
  }
  const current = r.missingFiles.filter((f) => f.untilSnapshot === null);
  const older = r.missingFiles.filter((f) => f.untilSnapshot !== null);
  const where = (f: DistributedRebuildReport['missingFiles'][number]) =>
    `${f.table ?? '(a dropped table)'} ${f.partition.join('/')}: ${f.location} (${f.kind === 'delete' ? 'delete file, ' : ''}${f.rows ?? '?'} rows; snapshots ${f.fromSnapshot ?? '?'}${
      f.untilSnapshot === null ? ' to the newest' : `-${f.untilSnapshot - 1}`
    })`;
  if (current.length) {
    out +=
      `MISSING from the store, in the newest snapshot (queries of these tables fail):\n${listed(current, where)}` +
      `  their rows are lost unless the files are restored to those paths from a backup of the store; else chainlake verify finds the windows they held and a new ` +
      `run of the job over their blocks fetches them again; chainlake catalog rebuild --catalog … --forget-missing ends them in a new snapshot so that the tables read again\n`;
  }
  if (older.length) {
    out +=
      `MISSING from the store, named only by older snapshots (time travel to those fails):\n${listed(older, where)}` +
      `  restore them from a backup of the store, or expire those snapshots: chainlake maintain --catalog … --keep-snapshots 1\n`;
  }
  if (r.forgotten) out += `forgotten: ${r.forgotten.files} missing file(s) ended in snapshot ${r.forgotten.snapshotId} (the newest reads without them)\n`;
  if (r.orphans.length) {
    out +=
      `ORPHANS: ${r.orphans.length} file(s) in the store that nothing names (a commit or fragment that was never recorded, or files written right now by a worker):\n` +
      listed(r.orphans, (o) => `${o.location} (${o.area}, written ${o.modifiedAt})`) +
      `  chainlake maintain --catalog … removes them once older than its --orphans-older-than\n`;
  }
  for (const n of r.notDone) out += `NOT DONE: ${n}\n`;
  out += r.whole ? `WHOLE: every file the catalog names is in the store, and every committed dataset has its table\n` : `NOT WHOLE: exit ${EXIT.differs}\n`;
  return out;
}

export const catalogCommand: CommandModule<object, Args> = {
  command: 'catalog <action>',
  describe:
    "Rebuild the lake's catalog: a local catalog.duckdb from the lake's files; a distributed lake's control-plane tables, checked against its store (exit 5 when the lake is not whole)",
  builder: (y) =>
    withLakeOptions(y, { distributed: true })
      .positional('action', {
        choices: ['rebuild'] as const,
        demandOption: true,
        describe:
          "rebuild: local lake: recreate every view (with column comments) at the lake's current absolute path and re-read the files table from the files; keeps runs, windows and watermarks. " +
          "Distributed lake (--catalog): re-create chainlake's control-plane tables and columns and the tables of committed datasets, and report files the catalog names that the store lacks, files nothing names (orphans) and datasets committed without a table; deletes nothing",
      })
      .option('format', { choices: ['text', 'json'] as const, default: 'text' as const, describe: 'text for a person, json for a program' })
      .option('forget-missing', {
        type: 'boolean',
        default: false,
        describe:
          "With --catalog: end the newest snapshot's files that the store lacks in a new snapshot, so that their tables read again without those rows (older snapshots still name them). Restore the files from a backup instead if there is one",
      })
      .example(
        '$0 catalog rebuild --lake /srv/lake',
        'After a damaged or deleted catalog.duckdb: rebuild it from the files, keeping what reads of the run history',
      )
      .example('$0 catalog rebuild --lake /mnt/new-place/lake', 'After moving or copying a lake (any chainlake command also does it by itself)')
      .example(
        '$0 catalog rebuild --catalog postgres://chainlake@db/lake',
        'A distributed lake: re-create what chainlake derives in PostgreSQL, and check the lake against its store (exit 0 whole, 5 not)',
      ),
  handler: async (args) => {
    const target = resolveLakeTarget(args);
    if (target.kind === 'distributed') {
      const r = await rebuildDistributedCatalog({
        catalog: checkCatalogUrl(target.catalog),
        store: target.store,
        storeConnection: target.storeConnection,
        forgetMissing: args['forget-missing'],
      });
      process.stdout.write(args.format === 'json' ? `${JSON.stringify(r, null, 2)}\n` : formatDistributedRebuild(r));
      if (!r.whole) process.exitCode = EXIT.differs;
      return;
    }
    if (args['forget-missing'])
      throw new CliError('--forget-missing goes with a distributed lake (--catalog): a local rebuild re-reads the lake from its files');
    const paths = new LakePaths(target.lake);
    if (!existsSync(paths.root)) throw new CliError(`no lake at ${paths.root}`);
    const r = await rebuildCatalog(paths);
    if (args.format === 'json') {
      process.stdout.write(`${JSON.stringify(r, null, 2)}\n`);
      return;
    }
    const rec = r.recovery;
    const s = r.salvage;
    if (s) {
      process.stdout.write(
        (s.problem === 'missing'
          ? `no catalog.duckdb at ${paths.root}: a new one was created from the lake's files\n`
          : `catalog.duckdb was damaged (${s.problem}); it was moved to ${s.damagedCopy} and a new one built\n`) +
          (s.kept.length ? `kept: ${s.kept.map((k) => `${k.table} (${k.rows} rows)`).join(', ')}\n` : '') +
          s.lost.map((l) => `lost: ${l.what}${s.problem === 'missing' || l.error === 'the file does not open' ? '' : ` (${l.error})`}\n`).join(''),
      );
    }
    process.stdout.write(
      `catalog rebuilt at ${paths.root}: ${r.files} files` +
        (r.partitionsFromDisk ? ` (${r.partitionsFromDisk} partitions rebuilt from ${r.filesReplaced} files on disk)` : '') +
        (r.unknownTables.length ? `; left alone, tables the catalog does not declare: ${r.unknownTables.join(', ')}` : '') +
        (rec.finished.length ? `; finished the pending commit of ${rec.finished.join(', ')}` : '') +
        (rec.abandoned.length ? `; recorded ${rec.abandoned.length} abandoned run(s)` : '') +
        '\n',
    );
  },
};
