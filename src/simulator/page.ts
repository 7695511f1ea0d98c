// A listing page written as bytes into one reused buffer: the success envelope around
// {"count":"N"<extra>,"data":[rows]}, the same bytes as the JSON.stringify of the results object wrapped by the
// server. Rows are written between openPage and closePage by the row writers (render*.ts); the buffer is handed
// to the response without a copy and taken back once the socket has it (ByteOut.takeOwned).

import { ByteOut, ascii } from './bytes.js';
import type { Results } from './handler.js';

const out = new ByteOut();
const OPEN = ascii('{"status":"200","message":"OK","results":{"count":"');
const DATA_OPEN = ascii(',"data":[');
const CLOSE = ascii(']}}');
const COMMA = 44;

/**
 * Starts a page of a listing of `count` entries; `extra` holds more members of the results object (each with a
 * leading comma, placed between count and data). Handlers are synchronous, so one buffer serves them all.
 */
export function openPage(count: number, extra = ''): ByteOut {
  out.reset();
  out.ensure(256);
  out.raw(OPEN);
  out.uint(count);
  out.byte(34);
  if (extra !== '') out.str(extra);
  out.ensure(16);
  out.raw(DATA_OPEN);
  return out;
}

/** Room for the row about to be written (rows are far shorter than this), and its separator. */
export function nextRow(o: ByteOut, index: number): void {
  o.ensure(4096);
  if (index > 0) o.byte(COMMA);
}

/** Ends the page started by openPage; `rows` is what the server counts as served. */
export function closePage(rows: number): Results {
  out.ensure(16);
  out.raw(CLOSE);
  const { bytes, release } = out.takeOwned();
  return { results: bytes, rows, enveloped: true, release };
}
