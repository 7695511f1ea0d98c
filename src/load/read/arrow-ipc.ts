import { AsyncByteQueue, RecordBatchStreamWriter } from 'apache-arrow';
import type { DuckDBResult } from '@duckdb/node-api';
import { DEFAULT_BATCH_ROWS, recordBatches } from './arrow.js';
import { ByteRing, type ByteWriter } from './byte-ring.js';

/** The writer's byte sink: the pieces of one batch's message (views of the batch's buffers), taken after each batch. */
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
  take(): Uint8Array[] {
    const out = this.chunks;
    this.chunks = [];
    return out;
  }
}

/**
 * A DuckDB result as an Arrow IPC stream (schema, record batches, end marker), handed to `write` through a
 * ByteRing: each batch is built in the same buffers as the one before (recordBatches without copies) and copied
 * into the ring before the next is built, so memory stays the same whatever the result's size. `write` must
 * resolve once it is done with the bytes it was given. Stops early when `closed()` says the reader went away.
 */
export async function writeArrowStream(result: DuckDBResult, write: ByteWriter, closed: () => boolean): Promise<void> {
  const sink = new Collected();
  const out = new ByteRing(write);
  const writer = new RecordBatchStreamWriter();
  writer.reset(sink);
  const put = async (): Promise<void> => {
    for (const piece of sink.take()) {
      out.bytes(piece);
      await out.flush();
    }
  };
  for await (const batch of recordBatches(result, DEFAULT_BATCH_ROWS, false)) {
    if (closed()) return;
    writer.write(batch);
    await put();
  }
  writer.finish();
  await put();
  await out.end();
}
