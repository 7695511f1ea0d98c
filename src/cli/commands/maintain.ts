import type { CommandModule } from 'yargs';
import { checkCatalogUrl } from '../../distributed/control-plane.js';
import { maintainLake, parseDuration } from '../../distributed/maintain.js';
import { CliError } from '../exit-codes.js';
import { redactUrl } from '../../distributed/url.js';
import { describeTarget, resolveLakeTarget, withLakeOptions, type LakeTarget } from '../lake-target.js';
import { existsSync } from 'node:fs';
import { LakePaths } from '../../load/paths.js';
import { maintainLocalLake, type MaintainReport, type RetentionOptions } from '../../load/write/maintenance.js';

interface Args {
  lake?: string;
  catalog?: string;
  store?: string;
  'expire-older-than'?: string;
  'keep-snapshots'?: number;
  'orphans-older-than': string;
  format: 'text' | 'json';
}

/** What `--format json` prints: the lake, where the choice came from, and what was done (the URL without a password). */
function jsonLine(t: LakeTarget, r: MaintainReport): string {
  const lake = t.kind === 'local' ? { kind: 'local', lake: t.lake, from: t.from } : { kind: 'distributed', catalog: redactUrl(t.catalog), from: t.from };
  return `${JSON.stringify({ ...lake, expiredSnapshots: r.expiredSnapshots, deletedFiles: r.deletedFiles, orphansRemoved: r.orphansRemoved, orphansKept: r.orphansKept })}\n`;
}

/** What was done, in the same words for either kind of lake (`which` names it). */
function textLine(which: string, r: MaintainReport): string {
  return (
    `${which}: expired ${r.expiredSnapshots} snapshots, deleted ${r.deletedFiles} files no snapshot needs, removed ${r.orphansRemoved} files nothing refers to` +
    `${r.orphansKept ? ` (kept ${r.orphansKept} younger than --orphans-older-than)` : ''}\n`
  );
}

export const maintainCommand: CommandModule<object, Args> = {
  command: 'maintain',
  describe:
    'Expire old snapshots, delete the files no snapshot needs, and sweep files nothing refers to (a single-machine lake, or with --catalog a distributed one)',
  builder: (y) =>
    withLakeOptions(y, { distributed: true })
      .option('expire-older-than', { type: 'string', describe: 'Expire snapshots older than this (7d, 12h, 30m); the newest is always kept' })
      .option('keep-snapshots', { type: 'number', describe: 'Expire all but the newest N snapshots' })
      .option('orphans-older-than', {
        type: 'string',
        default: '1h',
        describe: 'Remove files nothing refers to once older than this (files a live worker is writing are younger)',
      })
      .option('format', {
        choices: ['text', 'json'] as const,
        default: 'text' as const,
        describe:
          'A line of text, or one JSON object of what was done (kind, lake or catalog, from, expiredSnapshots, deletedFiles, orphansRemoved, orphansKept)',
      })
      .example('$0 maintain --expire-older-than 7d', 'Keep a week of time travel; free the rest')
      .example('$0 maintain --lake data/lake --keep-snapshots 1', 'A single-machine lake: keep only its newest snapshot')
      .example('$0 maintain --catalog postgres://chainlake@db/lake --store /mnt/lake --expire-older-than 7d', 'A distributed lake'),
  handler: async (args) => {
    const keep = args['keep-snapshots'];
    if (keep !== undefined && (!Number.isInteger(keep) || keep < 1))
      throw new CliError(`--keep-snapshots: expected a whole number of at least 1, got ${String(keep)}`);
    const older = args['expire-older-than'];
    const retention: RetentionOptions = {
      expireOlderThan: older === undefined ? undefined : new Date(Date.now() - parseDuration(older, '--expire-older-than') * 1000),
      keepSnapshots: keep,
      orphanGraceSeconds: parseDuration(args['orphans-older-than'], '--orphans-older-than'),
    };
    const target = resolveLakeTarget(args);
    // Which lake, and why: this command deletes files, so its output names the lake it tidied.
    const which = describeTarget(target);
    if (target.kind === 'local') {
      const paths = new LakePaths(target.lake);
      if (!existsSync(paths.catalog))
        throw new CliError(
          `no lake at ${paths.root} (no catalog.duckdb), chosen as ${which}`,
          'CHAINLAKE_USAGE',
          'check --lake, or give --catalog for a distributed lake',
        );
      const r = await maintainLocalLake(paths, retention);
      return void process.stdout.write(args.format === 'json' ? jsonLine(target, r) : textLine(which, r));
    }
    const catalog = checkCatalogUrl(target.catalog);
    if (!target.store) throw new CliError(`--store is required for ${which}`, 'CHAINLAKE_USAGE', 'give --store /shared/lake (or set CHAINLAKE_STORE)');
    const r = await maintainLake({ catalog, store: target.store, storeConnection: target.storeConnection, ...retention });
    process.stdout.write(args.format === 'json' ? jsonLine(target, r) : textLine(which, r));
  },
};
