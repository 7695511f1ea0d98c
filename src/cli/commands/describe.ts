import type { CommandModule } from 'yargs';
import { scopeKindsOf, type EndpointDef } from '../../datasets/dataset.js';
import { datasetNames, getDataset } from '../../datasets/registry.js';
import { CONTRACT_VERIFY } from '../../extract/explorer.js';
import { lakeColumns } from '../../load/schema.js';
import { SCOPE_KEYS } from '../../pipeline/job.js';
import { describeDecoded, STANDARD } from '../../decode/datasets.js';
import { datasetsReference } from '../reference.js';

interface Args {
  dataset?: string;
  format: 'text' | 'json' | 'markdown';
  endpoints?: boolean;
}

/** What `describe --endpoints` puts in the dataset column of an endpoint no dataset reads: the command that calls it. */
export const NO_DATASET = '(verify-contract)';

/**
 * Every endpoint of both APIs: its id (what a job's `paths` and `endpoints` name, and what messages call it),
 * dataset, API and default path. Last, contract verification, which only `verify-contract` calls.
 */
export function describeEndpoints(): { id: string; dataset: string; api: string; method: string; path: string }[] {
  return [
    ...datasetNames().flatMap((n) => getDataset(n).endpoints.map((e) => ({ id: e.id, dataset: n, api: e.api, method: e.method, path: e.path }))),
    { ...CONTRACT_VERIFY, dataset: NO_DATASET },
  ];
}

const scopeText = (e: EndpointDef): string => `${e.scope}${SCOPE_KEYS[e.scope].length ? ` (job: ${SCOPE_KEYS[e.scope].join(', ')})` : ''}`;

/** Everything a user needs to know about a dataset, generated from its declaration. */
export function describeDataset(name: string): string {
  const def = getDataset(name);
  const cols = lakeColumns(def);
  const width = Math.max(...cols.map((c) => c.name.length));
  const typeWidth = Math.max(...cols.map((c) => c.type.length));
  const nullable = new Map(def.columns.map((c) => [c.name, c.nullable]));
  return [
    `${def.name} (${def.kind} dataset, scopes: ${scopeKindsOf(def).join(', ')})`,
    `  ${def.doc}`,
    `  natural key: ${def.naturalKey.join(', ')}`,
    `  partitioned by: network, ${def.partition}${def.partitionFrom ? ` (UTC date of ${def.partitionFrom})` : ' (UTC date of the run)'}`,
    ...(def.ordinal ? [`  ordinal: numbers identical entries (${def.ordinal.over.join(', ')}) within each (${def.ordinal.groupBy.join(', ')})`] : []),
    '  endpoints:',
    ...def.endpoints.map(
      (e) =>
        `    ${e.id}: ${e.api} ${e.ref} (path ${e.path}); scope ${scopeText(e)}${e.blockRange ? '; windowed by block range' : ''}${e.alternate ? '; alternate (only when the job names it)' : ''}`,
    ),
    ...(def.notes?.length ? ['  notes:', ...def.notes.map((n) => `    - ${n}`)] : []),
    '  columns ("required": a row whose API value is missing or null goes to _rejects):',
    ...cols.map((c) => `    ${c.name.padEnd(width)}  ${c.type.padEnd(typeWidth)}  ${nullable.get(c.name) === false ? 'required  ' : '          '}${c.doc}`),
  ].join('\n');
}

/** The declaration as JSON: patterns as their source text (JSON cannot hold a RegExp). */
function jsonOf(name: string): unknown {
  const def = getDataset(name);
  return JSON.parse(
    JSON.stringify({ ...def, scopes: scopeKindsOf(def), lakeColumns: lakeColumns(def) }, (_, v: unknown) => (v instanceof RegExp ? v.source : v)),
  );
}

export const describeCommand: CommandModule<object, Args> = {
  command: 'describe [dataset]',
  describe: 'Show datasets: columns, types, docs, key, partition and endpoints',
  builder: (y) =>
    y
      .positional('dataset', {
        type: 'string',
        choices: [...datasetNames(), ...Object.keys(STANDARD)],
        describe: 'One dataset (default: list them all); events of other contracts: chainlake decode --describe',
      })
      .option('format', {
        choices: ['text', 'json', 'markdown'] as const,
        default: 'text' as const,
        describe: "markdown: every dataset's reference page (docs/datasets.md)",
      })
      .option('endpoints', { type: 'boolean', describe: 'List every endpoint\'s id (for a job\'s "paths" and "endpoints"), dataset and default path' })
      .example('$0 describe', 'List every dataset')
      .example('$0 describe transactions', 'Columns of transactions')
      .example('$0 describe --endpoints', 'Every endpoint id and its default path (for a job\'s "paths")'),
  handler: (args) => {
    if (args.format === 'markdown') {
      process.stdout.write(datasetsReference());
      return;
    }
    if (args.endpoints) {
      const list = describeEndpoints().filter((e) => !args.dataset || e.dataset === args.dataset);
      if (args.format === 'json') process.stdout.write(JSON.stringify(list, null, 2) + '\n');
      else {
        const w = Math.max(...list.map((e) => e.id.length));
        const d = Math.max(...list.map((e) => e.dataset.length));
        process.stdout.write(list.map((e) => `${e.id.padEnd(w)}  ${e.dataset.padEnd(d)}  ${e.api.padEnd(8)}  ${e.method} ${e.path}`).join('\n') + '\n');
      }
      return;
    }
    // Decoded standard token events (src/decode): written by a job's "decode" key or `chainlake decode`.
    const decoded = args.dataset ? STANDARD[args.dataset] : undefined;
    if (decoded) {
      process.stdout.write(args.format === 'json' ? JSON.stringify(decoded, null, 2) + '\n' : describeDecoded(decoded) + '\n');
      return;
    }
    if (args.format === 'json') {
      const names = args.dataset ? [args.dataset] : datasetNames();
      process.stdout.write(JSON.stringify(names.map(jsonOf), null, 2) + '\n');
      return;
    }
    if (args.dataset) {
      process.stdout.write(describeDataset(args.dataset) + '\n');
      return;
    }
    process.stdout.write(
      datasetNames()
        .map((n) => `${n.padEnd(24)} ${getDataset(n).doc}`)
        .concat(Object.values(STANDARD).map((d) => `${d.name.padEnd(24)} (decoded) ${d.doc}`))
        .join('\n') + '\n',
    );
  },
};
