import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import type { CommandModule } from 'yargs';
import { LakePaths } from '../../load/paths.js';
import { parseGenesis, summarize, type GenesisAllocations, type ReconciliationRow } from '../../load/read/reconcile.js';
import { CliError, EXIT } from '../exit-codes.js';
import { describeTarget, resolveLakeTarget, withLakeOptions } from '../lake-target.js';

interface Args {
  lake?: string;
  catalog?: string;
  store?: string;
  genesis?: string;
  format: 'text' | 'json';
}

const json = (r: ReconciliationRow) => ({
  network: r.network,
  snapshot_date: r.snapshotDate,
  address: r.address,
  asset: r.asset,
  at_block: r.atBlock,
  reported: r.reported?.toString() ?? null,
  computed: r.computed?.toString() ?? null,
  difference: r.difference?.toString() ?? null,
  reconciled: r.outcome === 'reconciled',
  outcome: r.outcome,
  reason: r.reason,
  rows_counted: r.rows,
});

async function readGenesis(file: string | undefined): Promise<GenesisAllocations | undefined> {
  if (file === undefined) return undefined;
  const text = await readFile(file, 'utf8').catch((e: NodeJS.ErrnoException) => {
    throw new CliError(`--genesis: cannot read ${file} (${e.code ?? e.message})`, 'CHAINLAKE_USAGE', 'give the path of a genesis allocation file (JSON)');
  });
  return parseGenesis(text, `--genesis ${file}`);
}

/** `chainlake reconcile`: reported balances against the lake's own rows (docs/lake.md, "Reconciliation"). */
export const reconcileCommand: CommandModule<object, Args> = {
  command: 'reconcile',
  describe: "Compare the balances the API reported with those the lake's rows imply; exit 5 when one differs",
  builder: (y) =>
    withLakeOptions(y, { distributed: true })
      .option('genesis', {
        type: 'string',
        describe: 'Genesis allocations as JSON {"<network>": {"<address>": "<wei>"}}: the opening balances no listing shows',
      })
      .option('format', {
        choices: ['text', 'json'] as const,
        default: 'text' as const,
        describe: 'A summary and the rows not reconciled, or one JSON object: counts and every row',
      })
      .example('$0 reconcile --lake data/lake', 'Reconcile every balance the lake holds; the table lands as `reconciliation`')
      .example('$0 reconcile --genesis genesis.json --format json', 'With the chain’s genesis allocations, as JSON'),
  handler: async (args) => {
    const genesis = await readGenesis(args.genesis);
    const target = resolveLakeTarget(args);
    let rows: ReconciliationRow[];
    let written: string;
    if (target.kind === 'local') {
      const paths = new LakePaths(target.lake);
      if (!existsSync(paths.catalog)) throw new CliError(`no lake at ${paths.root}: ${paths.catalog} does not exist (run a job first)`, 'CHAINLAKE_NO_LAKE');
      const { reconcileLocalLake } = await import('../../lake/reconcile.js');
      const r = await reconcileLocalLake(paths, { genesis });
      rows = r.rowsOut;
      written = `written to the lake's reconciliation table (run ${r.runId})`;
    } else {
      const { reconcileDistributedLake } = await import('../../distributed/reconcile.js');
      const r = await reconcileDistributedLake({ catalog: target.catalog, store: target.store, storeConnection: target.storeConnection, genesis });
      rows = r.rowsOut;
      written = `computed over snapshot ${r.readSnapshot}, written to the lake's reconciliation table (snapshot ${r.snapshotId}, run ${r.runId})`;
    }
    const s = summarize(rows);
    process.exitCode = s.differs > 0 ? EXIT.differs : EXIT.ok;
    if (args.format === 'json') {
      process.stdout.write(JSON.stringify({ lake: describeTarget(target), ...s, rows: rows.map(json) }, null, 2) + '\n');
      return;
    }
    const lines = [
      `reconciled ${s.reconciled} of ${s.balances} balances of ${describeTarget(target)}: ${s.differs} differ, ${s.unchecked} unchecked; ${written}`,
    ];
    for (const r of rows.filter((x) => x.outcome !== 'reconciled'))
      lines.push(`  ${r.outcome.padEnd(9)} ${r.network} ${r.snapshotDate} ${r.address} ${r.asset}: ${r.reason ?? ''}`);
    process.stdout.write(lines.join('\n') + '\n');
  },
};
