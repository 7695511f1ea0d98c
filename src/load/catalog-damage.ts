/**
 * A damaged catalog.duckdb, recognised and named: kept apart from the salvage itself (load/write/salvage.ts) so that
 * every command's error path can say it without loading DuckDB.
 */
import { ChainlakeError } from '../errors.js';

/** DuckDB's words for a catalog file it cannot read: a bad checksum, a bad header, a truncated file. */
const DAMAGE = /Corrupt database file|not a valid DuckDB database file|Could not read enough bytes from file|checksum \d* ?does not match/i;

/** True when an error is DuckDB refusing a damaged database file. */
export function isCatalogDamage(e: unknown): boolean {
  return e instanceof Error && DAMAGE.test(e.message);
}

/** What every command says when it meets a damaged catalog: the fix is `catalog rebuild`. */
export class CatalogDamagedError extends ChainlakeError {
  constructor(cause: unknown, lake?: string) {
    super(`the lake's catalog.duckdb is damaged: ${(cause as Error).message}`, {
      cause,
      code: 'CHAINLAKE_CATALOG_DAMAGED',
      hint: `run \`chainlake catalog rebuild${lake ? ` --lake ${lake}` : ' --lake <this lake>'}\`: it rebuilds the catalog from the lake's files and keeps what it can read of the run history`,
    });
  }
}
