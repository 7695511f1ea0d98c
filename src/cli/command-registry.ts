import type { CommandModule } from 'yargs';

/**
 * Every command, by its name, loaded when it runs: a command's module brings its engines (DuckDB, the HTTP
 * client, PostgreSQL, metrics), and loading all of them cost every invocation, even `--version` or a flag
 * refused at once, several hundred milliseconds. The order is the order of `--help`.
 */
// Each command has its own argument type.
type AnyCommand = CommandModule<any, any>;
export const COMMANDS: Record<string, () => Promise<AnyCommand>> = {
  run: async () => (await import('./commands/run.js')).runCommand,
  plan: async () => (await import('./commands/plan.js')).planCommand,
  export: async () => (await import('./commands/export.js')).exportCommand,
  query: async () => (await import('./commands/query.js')).queryCommand,
  describe: async () => (await import('./commands/describe.js')).describeCommand,
  simulate: async () => (await import('./commands/simulate.js')).simulateCommand,
  status: async () => (await import('./commands/status.js')).statusCommand,
  report: async () => (await import('./commands/report.js')).reportCommand,
  verify: async () => (await import('./commands/verify.js')).verifyCommand,
  compact: async () => (await import('./commands/compact.js')).compactCommand,
  catalog: async () => (await import('./commands/catalog.js')).catalogCommand,
  decode: async () => (await import('./commands/decode.js')).decodeCommand,
  schedule: async () => (await import('./commands/schedule.js')).scheduleCommand,
  enqueue: async () => (await import('./commands/enqueue.js')).enqueueCommand,
  worker: async () => (await import('./commands/worker.js')).workerCommand,
  maintain: async () => (await import('./commands/maintain.js')).maintainCommand,
  reconcile: async () => (await import('./commands/reconcile.js')).reconcileCommand,
  'verify-contract': async () => (await import('./commands/verify-contract.js')).verifyContractCommand,
  schema: async () => (await import('./commands/schema.js')).schemaCommand,
  explain: async () => (await import('./commands/explain.js')).explainCommand,
};

/** Options of the whole CLI that take a value: the word after them is not the command. */
const GLOBAL_VALUE_OPTIONS = new Set(['--log-format']);

/** The command a command line names (its first word that is not an option), if it is one of ours. */
export function commandOf(argv: readonly string[]): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (GLOBAL_VALUE_OPTIONS.has(a)) i++;
    else if (!a.startsWith('-')) return Object.hasOwn(COMMANDS, a) ? a : undefined;
  }
  return undefined;
}
