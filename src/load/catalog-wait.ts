/**
 * Telling the user that a command waits for `catalog.duckdb` (another process holds DuckDB's file lock). Apart from
 * catalog.ts so that the CLI can listen without loading DuckDB.
 */
/** What a wait for the catalog file is about: shown to the user once the wait lasts (see onCatalogWait). */
export interface CatalogWait {
  /** `commit` (a writer: any other process holding the file blocks it) or `query` (a reader: only a writer does). */
  what: string;
  /** The catalog file. */
  file: string | undefined;
  /** The process DuckDB names as the holder (`/usr/bin/duckdb (PID 4242)`), when it does. */
  holder: string | undefined;
  /** How long the wait lasts at most. */
  waitMs: number;
}

/** How long a wait goes unmentioned: commits and readers hold the file for moments; longer is someone's session. */
export const CATALOG_WAIT_NOTICE_MS = 1_000;

let listener: ((w: CatalogWait) => void) | undefined;

/**
 * Who hears that a command waits for the catalog file (the CLI prints it; a library host may log it). Without a
 * listener the wait is silent, as before.
 */
export function onCatalogWait(l: ((w: CatalogWait) => void) | undefined): void {
  listener = l;
}

/** The listener, if any (catalog.ts calls it). */
export function catalogWaitListener(): ((w: CatalogWait) => void) | undefined {
  return listener;
}

let configuredWaitMs: number | undefined;

/**
 * How long a command waits for the catalog file at most, set by the host (the CLI reads
 * `CHAINLAKE_CATALOG_WAIT_MS`; a library host may call this). Undefined: each wait's own default.
 */
export function setCatalogWaitMs(ms: number | undefined): void {
  if (ms !== undefined && !(Number.isFinite(ms) && ms >= 0)) throw new RangeError(`catalog wait ${ms} ms: expected a number of milliseconds >= 0`);
  configuredWaitMs = ms;
}

/** The configured wait, or `fallback` (the wait's own default) when the host set none. */
export function catalogWaitMs(fallback: number): number {
  return configuredWaitMs ?? fallback;
}
