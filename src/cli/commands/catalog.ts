import { existsSync } from 'node:fs';
import type { CommandModule } from 'yargs';
import { rebuildCatalog } from '../../load/maintenance.js';
import { LakePaths } from '../../load/paths.js';
import { CliError } from '../exit-codes.js';

interface Args {
  action: 'rebuild';
  lake: string;
}

export const catalogCommand: CommandModule<object, Args> = {
  command: 'catalog <action>',
  describe: "Maintain the lake's catalog.duckdb (rebuild: views at the lake's current path, files table from disk)",
  builder: (y) =>
    y
      .positional('action', {
        choices: ['rebuild'] as const,
        demandOption: true,
        describe:
          "rebuild: recreate every view (with column comments) at the lake's current absolute path and re-read the files table from the files; keeps runs, windows and watermarks",
      })
      .option('lake', { type: 'string', default: 'data/lake', describe: 'Lake directory' })
      .example('$0 catalog rebuild --lake /mnt/new-place/lake', 'After moving or copying a lake (any chainlake command also does it by itself)'),
  handler: async (args) => {
    const paths = new LakePaths(args.lake);
    if (!existsSync(paths.root)) throw new CliError(`no lake at ${paths.root}`);
    const r = await rebuildCatalog(paths);
    const rec = r.recovery;
    process.stdout.write(
      `catalog rebuilt at ${paths.root}: ${r.files} files (${r.filesAdded} added, ${r.filesForgotten} forgotten)` +
        (rec.finished.length ? `; finished the pending commit of ${rec.finished.join(', ')}` : '') +
        (rec.abandoned.length ? `; recorded ${rec.abandoned.length} abandoned run(s)` : '') +
        '\n',
    );
  },
};
