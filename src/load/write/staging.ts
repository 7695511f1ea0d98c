import { once } from 'node:events';
import { createWriteStream, type WriteStream } from 'node:fs';
import { mkdir, rm, stat, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { RawPage } from '../../extract/pager.js';
import type { AcceptedPage, RejectRecord, StagedRow } from '../../transform/rows.js';
import { JOURNAL_FILE } from './journal.js';
import { STAGED_PARTITION } from '../schema.js';
import { testHook } from '../test-hooks.js';
import { bugError } from '../../errors.js';
import { releaseBody } from '../../extract/body-pool.js';

/**
 * Appends one window's typed rows to an NDJSON file under the run's staging folder. Writes honour stream
 * backpressure, so a fast API cannot buffer a window in memory. A window that fails is discarded whole.
 */
export class StageFile {
  private stream: WriteStream | undefined;
  rows = 0;
  /** The longest line written, in bytes. */
  maxLineBytes = 0;
  /** Bytes of page lines written (writePage). */
  pageBytes = 0;
  /** Whether a page line carries its entries' `extra` texts (`x`): only then does the commit read them. */
  extras = false;
  /** Whether a page has (or may have) upper-case hex digits: only then are the file's hex columns lower-cased. */
  upperCaseHex = false;

  private constructor(readonly file: string) {}

  /** A file staged (and closed) earlier, as its writer left it: a window a failed run kept (pipeline/kept.ts). */
  static closed(file: string, facts: Pick<StageFile, 'rows' | 'maxLineBytes' | 'pageBytes' | 'extras' | 'upperCaseHex'>): StageFile {
    return Object.assign(new StageFile(file), facts);
  }

  static async open(file: string, opts: { dirExists?: boolean } = {}): Promise<StageFile> {
    if (!opts.dirExists) await mkdir(path.dirname(file), { recursive: true });
    const s = new StageFile(file);
    s.stream = createWriteStream(file, { flags: 'w' });
    // A write error (ENOSPC, EIO) is emitted once, possibly while nobody awaits: keep it, so the next write
    // or close throws it instead of waiting for a 'drain' or 'finish' that will never come (a full disk
    // hung the run forever), and so it is never an unhandled 'error' event.
    s.stream.on('error', () => undefined);
    await once(s.stream, 'open');
    return s;
  }

  private write(chunk: string | Buffer): Promise<void> {
    return this.writeAll([chunk]);
  }

  /** Writes the chunks as one corked batch (one writev, no concatenated copy), then honours backpressure. */
  private async writeAll(chunks: readonly (string | Buffer)[], written?: () => void): Promise<void> {
    const stream = this.stream;
    if (!stream) throw bugError(`stage file ${this.file} written after it was closed`);
    if (stream.errored) throw stream.errored;
    stream.cork();
    let ok = true;
    chunks.forEach((c, i) => {
      ok = (i === chunks.length - 1 && written ? stream.write(c, written) : stream.write(c)) && ok;
    });
    stream.uncork();
    if (!ok) await settled(stream, 'drain');
  }

  async writeRows(rows: readonly StagedRow[]): Promise<void> {
    if (rows.length === 0) return;
    let chunk = '';
    const prefix = `{"${STAGED_PARTITION}":"`;
    for (const r of rows) {
      // The partition rides in the row itself; splicing it in front avoids copying the values object.
      const body = JSON.stringify(r.values);
      chunk += body.length > 2 ? `${prefix}${r.partition}",${body.slice(1)}\n` : `${prefix}${r.partition}"}\n`;
    }
    this.rows += rows.length;
    await this.write(chunk);
    await testHook('stage-write');
  }

  /**
   * One accepted page as one line: what the entries do not carry (`p` partition, `k` constants, `o`
   * ordinals, `x` the entries' `extra` texts), then the body as received under `b` (see schema.ts `stagedPagesSelect`). The body is JSON
   * on one line once its line breaks (whitespace outside strings, never raw inside them) become spaces.
   */
  async writePage(page: AcceptedPage, raw: RawPage): Promise<void> {
    let body = raw.bytes;
    if (body.indexOf(10) !== -1 || body.indexOf(13) !== -1) {
      body = Buffer.from(body);
      for (let i = 0; i < body.length; i++) if (body[i] === 10 || body[i] === 13) body[i] = 32;
    }
    // Hex values with upper-case digits are lower-cased here, where a byte loop over the values that need it
    // is cheaper than DuckDB's lower() over every hex value. In place: an accepted page's bytes are read by
    // nothing after staging (the request log hashed them as they came), and a copy of every body cost the
    // garbage collector more than the loop saves.
    const spans = page.upperCaseSpans;
    if (spans) {
      for (let k = 0; k < spans.length; k += 2) {
        for (let i = spans[k]!; i < spans[k + 1]!; i++) {
          const c = body[i]!;
          if (c >= 65 && c <= 70) body[i] = c + 32;
        }
      }
    }
    const head = Buffer.from(
      `{"p":${JSON.stringify(page.partition)},"k":${JSON.stringify(page.constants)}${page.ordinals ? `,"o":[${page.ordinals.join(',')}]` : ''}${page.extras ? `,"x":${JSON.stringify(page.extras)}` : ''},"b":`,
    );
    this.rows += page.rows;
    if (page.extras) this.extras = true;
    if (page.upperCaseHex) this.upperCaseHex = true;
    this.maxLineBytes = Math.max(this.maxLineBytes, head.length + body.length + PAGE_END.length);
    this.pageBytes += head.length + body.length + PAGE_END.length;
    // Nothing reads the body after staging: its buffer serves the next body once written (body-pool.ts).
    await this.writeAll([head, body, PAGE_END], () => releaseBody(raw));
    await testHook('stage-write');
  }

  async writeRejects(rejects: readonly RejectRecord[]): Promise<void> {
    if (rejects.length === 0) return;
    this.rows += rejects.length;
    await this.write(rejects.map((r) => JSON.stringify(r)).join('\n') + '\n');
  }

  async close(): Promise<void> {
    const stream = this.stream;
    this.stream = undefined;
    if (!stream) return;
    if (stream.errored) throw stream.errored;
    stream.end();
    await settled(stream, 'finish');
  }

  async discard(): Promise<void> {
    const stream = this.stream;
    this.stream = undefined;
    if (stream && !stream.closed) {
      const closed = once(stream, 'close').catch(() => undefined);
      stream.destroy();
      await closed;
    }
    // One call (rm checks what the path is first); a file already gone is no error.
    await unlink(this.file).catch((e: NodeJS.ErrnoException) => {
      if (e.code !== 'ENOENT') throw e;
    });
  }
}

const PAGE_END = Buffer.from('}\n');

/**
 * A new page file is started once the current one holds this many bytes. DuckDB's JSON reader takes a file in
 * one large buffer and parses every line in it before the next: small files cost less memory and
 * time (docs/performance.md, "Page files").
 */
export const PAGE_FILE_BYTES = 2 * 1024 * 1024;

/** A window's pages staged as received: files `<stem>-<n>.ndjson` of about PAGE_FILE_BYTES each. */
export class PageFiles {
  readonly files: StageFile[] = [];

  constructor(
    private readonly stem: string,
    private readonly bytesPerFile = PAGE_FILE_BYTES,
  ) {}

  async writePage(page: AcceptedPage, raw: RawPage): Promise<void> {
    let current = this.files[this.files.length - 1];
    if (!current || current.pageBytes >= this.bytesPerFile) {
      await current?.close();
      current = await StageFile.open(`${this.stem}-${this.files.length}.ndjson`, { dirExists: this.files.length > 0 });
      this.files.push(current);
    }
    await current.writePage(page, raw);
  }

  get rows(): number {
    return this.files.reduce((n, f) => n + f.rows, 0);
  }

  async close(): Promise<void> {
    await this.files[this.files.length - 1]?.close();
  }

  async discard(): Promise<void> {
    for (const f of this.files) await f.discard();
  }
}

/**
 * Resolves on `event`; rejects with the stream's error if it fails before (or already has) — an errored
 * stream emits neither 'drain' nor 'finish', only 'error' once and then 'close'.
 */
function settled(stream: WriteStream, event: 'drain' | 'finish'): Promise<void> {
  return new Promise((resolve, reject) => {
    const done = (e?: Error | null): void => {
      stream.off(event, ok);
      stream.off('error', done);
      stream.off('close', closed);
      if (e) reject(e);
      else resolve();
    };
    const ok = (): void => done();
    const closed = (): void =>
      done(
        stream.errored ??
          (event === 'finish' && stream.writableFinished ? null : bugError(`stage file closed before ${event} while a write or close waited for it`)),
      );
    if (stream.errored) return done(stream.errored);
    stream.on(event, ok);
    stream.on('error', done);
    stream.on('close', closed);
  });
}

/** What a run's staging folder says about its run, so that recovery can record a run killed before its commit. */
export interface StagingInfo {
  runId: string;
  job: string;
  startedAt: string;
  pid: number;
}

export const STAGING_INFO_FILE = 'run.json';

/** Creates the run's staging folder (under the lake lock) and notes which run it belongs to. */
export async function openRunStaging(dir: string, info: StagingInfo): Promise<void> {
  await mkdir(dir, { recursive: true });
  await writeFile(path.join(dir, STAGING_INFO_FILE), JSON.stringify(info));
}

/**
 * Removes a run's staging folder once the run is over — unless it holds a decided commit (a journal) that
 * could not be applied: that one must survive for the next command to finish.
 */
export async function closeRunStaging(dir: string): Promise<void> {
  const pending = await stat(path.join(dir, JOURNAL_FILE)).then(
    () => true,
    () => false,
  );
  if (pending) {
    await rm(path.join(dir, 'duckdb-tmp'), { recursive: true, force: true });
    return;
  }
  await rm(dir, { recursive: true, force: true });
}
