import { existsSync } from 'node:fs';
import type { CommandModule } from 'yargs';
import { rebuildCatalog } from '../../load/write/maintenance.js';
import { LakePaths } from '../../load/paths.js';
import { CliError } from '../exit-codes.js';
import { localOnly, resolveLakeTarget, withLakeOptions } from '../lake-target.js';

interface Args {
  action: 'rebuild';
  lake?: string;
  catalog?: string;
  store?: string;
}

export const catalogCommand: CommandModule<object, Args> = {
  command: 'catalog <action>',
  describe: "Maintain the lake's catalog.duckdb (rebuild: views at the lake's current path, files table from disk; recovers a damaged or missing catalog)",
  builder: (y) =>
    withLakeOptions(y, { distributed: false })
      .positional('action', {
        choices: ['rebuild'] as const,
        demandOption: true,
        describe:
          "rebuild: recreate every view (with column comments) at the lake's current absolute path and re-read the files table from the files; keeps runs, windows and watermarks",
      })
      .example(
        '$0 catalog rebuild --lake /srv/lake',
        'After a damaged or deleted catalog.duckdb: rebuild it from the files, keeping what reads of the run history',
      )
      .example('$0 catalog rebuild --lake /mnt/new-place/lake', 'After moving or copying a lake (any chainlake command also does it by itself)'),
  handler: async (args) => {
    const paths = new LakePaths(
      localOnly(
        'catalog rebuild',
        resolveLakeTarget(args),
        "a distributed lake's catalog is its PostgreSQL database, which no file can rebuild: restore the database from its backup; chainlake maintain --catalog then sweeps the files it does not list",
      ),
    );
    if (!existsSync(paths.root)) throw new CliError(`no lake at ${paths.root}`);
    const r = await rebuildCatalog(paths);
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
