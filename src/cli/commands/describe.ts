import type { CommandModule } from 'yargs';
import { datasetNames, getDataset } from '../../datasets/registry.js';
import { lakeColumns } from '../../load/schema.js';

interface Args {
  dataset?: string;
  format: 'text' | 'json';
}

/** Everything a user needs to know about a dataset, generated from its declaration. */
export function describeDataset(name: string): string {
  const def = getDataset(name);
  const cols = lakeColumns(def);
  const width = Math.max(...cols.map((c) => c.name.length));
  const typeWidth = Math.max(...cols.map((c) => c.type.length));
  return [
    `${def.name} (${def.kind} dataset, scope: ${def.scope})`,
    `  ${def.doc}`,
    `  natural key: ${def.naturalKey.join(', ')}`,
    `  partitioned by: network, ${def.partition}${def.partitionFrom ? ` (UTC date of ${def.partitionFrom})` : ''}`,
    `  endpoints: ${def.endpoints.map((e) => `${e.api} ${e.ref}`).join('; ')}`,
    '  columns:',
    ...cols.map((c) => `    ${c.name.padEnd(width)}  ${c.type.padEnd(typeWidth)}  ${c.doc}`),
  ].join('\n');
}

export const describeCommand: CommandModule<object, Args> = {
  command: 'describe [dataset]',
  describe: 'Show datasets: columns, types, docs, key, partition and endpoints',
  builder: (y) =>
    y
      .positional('dataset', { type: 'string', choices: datasetNames(), describe: 'One dataset (default: list them all)' })
      .option('format', { choices: ['text', 'json'] as const, default: 'text' as const })
      .example('$0 describe', 'List every dataset')
      .example('$0 describe transactions', 'Columns of transactions') as never,
  handler: (args) => {
    if (args.format === 'json') {
      const names = args.dataset ? [args.dataset] : datasetNames();
      process.stdout.write(
        JSON.stringify(
          names.map((n) => ({ ...getDataset(n), lakeColumns: lakeColumns(getDataset(n)) })),
          null,
          2,
        ) + '\n',
      );
      return;
    }
    if (args.dataset) {
      process.stdout.write(describeDataset(args.dataset) + '\n');
      return;
    }
    process.stdout.write(
      datasetNames()
        .map((n) => `${n.padEnd(24)} ${getDataset(n).doc}`)
        .join('\n') + '\n',
    );
  },
};
