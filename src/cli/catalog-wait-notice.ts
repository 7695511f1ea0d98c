import type { CatalogWait } from '../load/catalog-wait.js';

/**
 * The line a command prints when it waits for `catalog.duckdb` past a moment: what waits, for which process, how
 * long at most, and how to avoid it.
 */
export function catalogWaitNotice(w: CatalogWait): string {
  const file = w.file ?? 'catalog.duckdb';
  const who = w.holder ?? 'another process';
  const most = `up to ${Math.ceil(w.waitMs / 1000)} s`;
  if (w.what === 'query')
    return (
      `chainlake: waiting for ${file}: ${who} has it open for writing (${most})\n` +
      '  hint: open the catalog with `duckdb -readonly` so that readers share it; a run holds it only while it commits\n'
    );
  return (
    `chainlake: the ${w.what} waits for ${file}: ${who} has it open (${most}; then the commit stays pending and the next command finishes it)\n` +
    '  hint: a commit needs the catalog to itself for a moment: close that session, keep DuckDB sessions on the catalog short while runs go on, or read with `chainlake query`, which opens it only for each query\n'
  );
}

/**
 * `CHAINLAKE_CATALOG_WAIT_MS`: the longest a command waits for the catalog file, in milliseconds (docs/lake.md).
 * Read here, by the CLI, and handed down; a value that is not a number of milliseconds is refused, not ignored.
 */
export function catalogWaitFromEnv(env: NodeJS.ProcessEnv): { ms?: number; error?: string } {
  const raw = env.CHAINLAKE_CATALOG_WAIT_MS;
  if (raw === undefined || raw.trim() === '') return {};
  const ms = Number(raw);
  if (!Number.isFinite(ms) || ms < 0 || !/^\s*\d+(\.\d+)?\s*$/.test(raw))
    return {
      error:
        `chainlake: CHAINLAKE_CATALOG_WAIT_MS=${JSON.stringify(raw)} is not a number of milliseconds\n` +
        '  hint: set it to the longest wait for the catalog file in milliseconds (e.g. 60000), or unset it for the defaults\n',
    };
  return { ms };
}
