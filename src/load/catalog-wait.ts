/**
 * Telling the user that a command waits for `catalog.duckdb` (another process holds DuckDB's file lock), and the error
 * when the wait runs out. Apart from catalog.ts so that the CLI (and the library's entry) can use them without loading
 * DuckDB.
 */
import { ChainlakeError } from '../errors.js';

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

/**
 * The catalog stayed locked by another process (a user's DuckDB session) for longer than the command would wait: what a
 * person fixes, but not a usage error (exit 1). Nothing that needed the catalog was done; the next chainlake command,
 * once the file is free, finishes what was decided.
 */
export class CatalogLockedError extends ChainlakeError {
  constructor(
    message: string,
    cause: unknown,
    /** What the command kept of its work for the next (a run's kept windows: pipeline/kept.ts), as its hint says it. */
    readonly keptText?: string,
  ) {
    super(message, {
      code: 'CHAINLAKE_FAILED',
      cause,
      hint: `close the session holding catalog.duckdb (a duckdb shell, another tool), or wait longer with CHAINLAKE_CATALOG_WAIT_MS; the next chainlake command finishes a decided commit${keptText ? `; ${keptText}` : ''}`,
    });
  }

  /** The same error, its hint saying what the command kept (or leaves to fetch again). */
  kept(text: string): CatalogLockedError {
    return new CatalogLockedError(this.message, this.cause, text);
  }
}
