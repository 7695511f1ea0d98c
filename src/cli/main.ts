#!/usr/bin/env node
// First: the CLI's runtime tuning (DuckDB's allocator reads its options when the library loads; V8's young
// generation is kept small before the run allocates): see runtime-tuning.ts. CHAINLAKE_RUNTIME_TUNING=off disables it.
import './runtime-tuning.js';
import { hideBin } from 'yargs/helpers';
import { closedPipe, runCli } from './cli.js';
import { EXIT } from './exit-codes.js';
import { onCatalogWait, setCatalogWaitMs } from '../load/catalog-wait.js';
import { armTestHooks } from '../load/test-hooks.js';
import { catalogWaitFromEnv, catalogWaitNotice } from './catalog-wait-notice.js';

// The bin: the process-wide settings a command line needs, then the parser (cli.ts, importable without them).

/** `chainlake query … | head`: the reader has all it wants. Not an error: stop quietly, exit 0. */
process.stdout.on('error', (e) => {
  if (!closedPipe(e)) throw e;
  process.exit(process.exitCode ?? EXIT.ok);
});
// Logs to a closed stderr (`2>&1 | head`) are dropped rather than crash a run that is still writing the lake.
process.stderr.on('error', (e) => {
  if (!closedPipe(e)) throw e;
});

// The AWS SDK warns on every process under Node 20 that it will need Node 22 from 2027 (the README says so
// once): a worker's log is not the place. A library user keeps the SDK's own behaviour.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

// Test-only kill and hold points of the crash-safety suite (src/load/test-hooks.ts), which runs this bin.
armTestHooks({ crashAt: (process.env.CHAINLAKE_TEST_CRASH_AT ?? '').split(',').filter(Boolean), holdAt: process.env.CHAINLAKE_TEST_HOLD_AT ?? '' });

// A command that waits for catalog.duckdb (another process's session holds it) says so, once the wait lasts.
onCatalogWait((w) => process.stderr.write(catalogWaitNotice(w)));
const wait = catalogWaitFromEnv(process.env);
if (wait.error !== undefined) {
  process.stderr.write(wait.error);
  process.exit(EXIT.usage);
}
setCatalogWaitMs(wait.ms);

const code = await runCli(hideBin(process.argv), { out: (t) => process.stdout.write(t), err: (t) => process.stderr.write(t) });
// A command that ended without an error set its own exit code (a run's outcome); an error decides it here.
if (code !== undefined) process.exitCode = code;
