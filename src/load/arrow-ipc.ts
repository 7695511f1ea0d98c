import { AsyncByteQueue, RecordBatchStreamWriter } from 'apache-arrow';
import type { DuckDBResult } from '@duckdb/node-api';
import { arrowBatches } from './arrow.js';

/** The writer's byte sink, emptied after each batch (the writer's own queue would grow while the output is slow). */
class Collected extends AsyncByteQueue {
  chunks: Uint8Array[] = [];
  override write(value: ArrayBufferView | ArrayBuffer | string): void {
    if (typeof value === 'string') this.chunks.push(Buffer.from(value));
    else
      this.chunks.push(
        value instanceof Uint8Array
          ? value
          : ArrayBuffer.isView(value)
            ? new Uint8Array(value.buffer, value.byteOffset, value.byteLength)
            : new Uint8Array(value),
      );
  }
  take(): Uint8Array {
    const out = Buffer.concat(this.chunks);
    this.chunks = [];
    return out;
  }
}

/**
 * A DuckDB result as an Arrow IPC stream (schema, record batches, end marker), handed to `write` batch by batch:
 * each batch's bytes are written before the next batch is built, so at most one batch is in JavaScript at a time.
 * Stops early when `closed()` says the reader went away.
 */
export async function writeArrowStream(result: DuckDBResult, write: (bytes: Uint8Array) => Promise<void>, closed: () => boolean): Promise<void> {
  const sink = new Collected();
  const writer = new RecordBatchStreamWriter();
  writer.reset(sink);
  for await (const batch of arrowBatches(result)) {
    if (closed()) return;
    writer.write(batch);
    await write(sink.take());
  }
  writer.finish();
  await write(sink.take());
}
