// Pages recorded once from the simulator, then replayed from disk through the real pipeline (pager,
// transform, staging, commit) with no HTTP: a transport whose calls read the recorded body of the same URL.

import { open, writeFile, appendFile, readFile, type FileHandle } from 'node:fs/promises';
import type { Accounting } from '../../src/extract/accounting.js';
import type { ListScan } from '../../src/extract/scan.js';
import { HttpTransport, parseBody, type EnvelopeCheck, type HttpRequest, type TransportOptions } from '../../src/extract/transport.js';

const keyOf = (req: HttpRequest): string => `${req.method} ${req.url.pathname}${req.url.search}`;

interface Entry {
  off: number;
  len: number;
}

/** A live HTTP transport that also appends every successful body to `file` (index in `file.index.json`). */
export class RecordingTransport extends HttpTransport {
  private readonly index: Record<string, Entry> = {};
  private size = 0;
  private writes: Promise<void> = Promise.resolve();
  /** Keys of recorded calls, in the order they completed. */
  readonly keys: string[] = [];

  constructor(
    private readonly file: string,
    concurrency: number,
  ) {
    super({ concurrency });
  }

  override async call<T>(req: HttpRequest, check: EnvelopeCheck<T>, acct: Accounting, scan?: ListScan): Promise<T> {
    let bytes: Buffer = Buffer.alloc(0);
    const value = await super.call(
      req,
      (body, received, list) => {
        const v = check(body, received, list);
        // A copy: the body's buffer serves another body once its page is staged (src/extract/body-pool.ts), and
        // the recording is written after that.
        bytes = Buffer.from(received);
        return v;
      },
      acct,
      scan,
    );
    const key = keyOf(req);
    if (!this.index[key]) {
      this.index[key] = { off: this.size, len: bytes.length };
      this.size += bytes.length;
      this.keys.push(key);
      this.writes = this.writes.then(() => appendFile(this.file, bytes));
    }
    return value;
  }

  override async close(): Promise<void> {
    await this.writes;
    await writeFile(`${this.file}.index.json`, JSON.stringify(this.index));
    await super.close();
  }
}

/**
 * Answers every call from the recording: read from disk, then parsed (scanned where the call asks) and checked
 * by the same `parseBody` and the client's own envelope check as a live call.
 */
export class ReplayTransport extends HttpTransport {
  private fh: FileHandle | undefined;

  private constructor(
    private readonly index: Record<string, Entry>,
    opts: Pick<TransportOptions, 'scanLists'>,
  ) {
    super({ concurrency: 1, ...opts });
  }

  /** `opts.scanLists: false` replays without scanning bodies (to measure what the scan saves). */
  static async open(file: string, opts: Pick<TransportOptions, 'scanLists'> = {}): Promise<ReplayTransport> {
    const index = JSON.parse(await readFile(`${file}.index.json`, 'utf8')) as Record<string, Entry>;
    const t = new ReplayTransport(index, opts);
    t.fh = await open(file, 'r');
    return t;
  }

  override async call<T>(req: HttpRequest, check: EnvelopeCheck<T>, acct: Accounting, scan?: ListScan): Promise<T> {
    const e = this.index[keyOf(req)];
    if (!e) throw new Error(`replay: no recorded page for ${keyOf(req)}`);
    acct.recordRequest();
    const buf = Buffer.allocUnsafe(e.len);
    await this.fh!.read(buf, 0, e.len, e.off);
    acct.recordResponse(0, e.len);
    const got = parseBody(buf, this.listScan(scan));
    if (!got) throw new Error(`replay: the recorded body of ${keyOf(req)} is not JSON`);
    return check(got.body, buf, got.list);
  }

  override async close(): Promise<void> {
    await this.fh?.close();
    this.fh = undefined;
  }
}

/** The dataset a recorded list call belongs to (the three datasets the scenarios record). */
export const datasetOfKey = (key: string): string | undefined =>
  key.includes('/token-transfer/erc20')
    ? 'erc20_transfers'
    : key.includes('/event-logs')
      ? 'event_logs'
      : key.includes('/transactions?')
        ? 'transactions'
        : undefined;

/** Every entry of the recorded list pages (not the one-row count probes), one JSON object per line, by dataset. */
export async function recordedEntriesAsNdjson(
  file: string,
  datasetOf: (key: string) => string | undefined,
  out: (dataset: string) => string,
): Promise<Map<string, number>> {
  const index = JSON.parse(await readFile(`${file}.index.json`, 'utf8')) as Record<string, Entry>;
  const fh = await open(file, 'r');
  const rows = new Map<string, number>();
  try {
    const chunks = new Map<string, string[]>();
    for (const [key, e] of Object.entries(index)) {
      const dataset = datasetOf(key);
      if (!dataset || /[?&]limit=1(&|$)/.test(key)) continue;
      const buf = Buffer.allocUnsafe(e.len);
      await fh.read(buf, 0, e.len, e.off);
      const data = (JSON.parse(buf.toString('utf8')) as { results: { data: unknown[] } }).results.data;
      const list = chunks.get(dataset) ?? [];
      for (const entry of data) list.push(JSON.stringify(entry));
      chunks.set(dataset, list);
      rows.set(dataset, (rows.get(dataset) ?? 0) + data.length);
      if (list.length >= 50_000) {
        await appendFile(out(dataset), list.join('\n') + '\n');
        chunks.set(dataset, []);
      }
    }
    for (const [dataset, list] of chunks) if (list.length) await appendFile(out(dataset), list.join('\n') + '\n');
  } finally {
    await fh.close();
  }
  return rows;
}
