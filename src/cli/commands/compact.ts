import { existsSync } from 'node:fs';
import type { CommandModule } from 'yargs';
import { datasetNames } from '../../datasets/registry.js';
import { checkCatalogUrl } from '../../distributed/control-plane.js';
import { compactDistributedLake } from '../../distributed/maintain.js';
import { compactLake } from '../../load/write/maintenance.js';
import type { CompactReport } from '../../load/write/compaction.js';
import { LakePaths } from '../../load/paths.js';
import { REJECTS_DATASET } from '../../load/schema.js';
import { CliError } from '../exit-codes.js';
import { describeTarget, resolveLakeTarget, withLakeOptions } from '../lake-target.js';

interface Args {
  lake?: string;
  catalog?: string;
  store?: string;
  dataset?: string[];
  format: 'text' | 'json';
}

const mib = (b: number): string => `${(b / 1024 / 1024).toFixed(1)} MiB`;

export const compactCommand: CommandModule<object, Args> = {
  command: 'compact',
  describe:
    'Rewrite each partition that holds several data files into one sorted, ZSTD, one-row-per-key ducklake-<uuid>.parquet (one snapshot per batch, crash-safe); a partition of one file is left as it is. With --catalog, a distributed lake: one snapshot under the committer lease',
  builder: (y) =>
    withLakeOptions(y, { distributed: true })
      .option('dataset', {
        type: 'string',
        array: true,
        describe: `Only these tables (default: all): ${[...datasetNames(), REJECTS_DATASET].join(', ')}, and the lake's decoded and reconciliation tables`,
      })
      .option('format', { choices: ['text', 'json'] as const, default: 'text' as const })
      .example('$0 compact', 'Compact every dataset of data/lake')
      .example('$0 compact --lake /srv/lake --dataset transactions', 'Only transactions')
      .example('$0 compact --catalog postgres://chainlake@db/lake --store /mnt/lake', 'A distributed lake'),
  handler: async (args) => {
    const target = resolveLakeTarget(args);
    let r: CompactReport;
    if (target.kind === 'distributed') {
      r = await compactDistributedLake({
        catalog: checkCatalogUrl(target.catalog),
        store: target.store,
        storeConnection: target.storeConnection,
        datasets: args.dataset,
      });
    } else {
      const paths = new LakePaths(target.lake);
      if (!existsSync(paths.catalog)) throw new CliError(`no lake at ${paths.root}: ${paths.catalog} does not exist (run a job first)`);
      r = await compactLake(paths, { datasets: args.dataset });
    }
    if (args.format === 'json') return void process.stdout.write(JSON.stringify(r, null, 2) + '\n');
    process.stdout.write(`${describeTarget(target)}: ${describeCompaction(r)}\n`);
  },
};

/** One line for a compaction of either kind of lake. */
function describeCompaction(r: CompactReport): string {
  const done =
    r.partitions === 0
      ? 'nothing to compact'
      : `compacted ${r.partitions} partitions: ${r.filesBefore} -> ${r.filesAfter} files, ${r.rowsBefore} -> ${r.rowsAfter} rows (${r.rowsBefore - r.rowsAfter} duplicates removed), ${mib(r.bytesBefore)} -> ${mib(r.bytesAfter)}, as snapshot ${r.snapshotId}`;
  return (
    done +
    (r.alreadyCompact ? `; ${r.alreadyCompact} partitions already compact (one file each), left as they are` : '') +
    (r.prunedDirs ? `; ${r.prunedDirs} empty partition folders removed` : '')
  );
}
