// The pager's per-row range check reads each entry's block number; on a scanned body it must not parse the
// entries just to learn that they carry none (event logs): the scan already lists every key the entries have.
import { describe, expect, it } from 'vitest';
import { BlockSeek } from '../../src/extract/block-seek.js';
import type { FetchedPage } from '../../src/extract/page.js';
import { scanList } from '../../src/extract/scan.js';

/** A page as the endpoint fetcher makes it from a scanned body: its entries parsed from the bytes on first read. */
function scannedPage(body: unknown, fields: readonly string[]): { page: FetchedPage; parses: () => number } {
  const bytes = Buffer.from(JSON.stringify(body));
  const list = scanList(bytes, ['result', 'data'], fields);
  if (!list) throw new Error('the body was not scanned');
  let parses = 0;
  const raw = { bytes, entriesAt: ['result', 'data'], list, entries: [] as unknown[] };
  const page: FetchedPage = {
    size: list.count,
    raw,
    results: {},
    count: list.count,
    offset: 0,
    get entries() {
      parses++;
      return list.parse();
    },
  };
  return { page, parses: () => parses };
}

const logs = [
  { transaction_hash: '0xaa', log_index: '0', data: '0x' },
  { transaction_hash: '0xbb', log_index: '1', data: '0x01' },
];

describe('BlockSeek.blocksOf on a scanned page', () => {
  it('entries without the block field: no block, and the entries are not parsed', () => {
    const { page, parses } = scannedPage({ result: { data: logs } }, ['transaction_hash', 'log_index']);
    expect(new BlockSeek('block_number').blocksOf(page)).toEqual([undefined, undefined]);
    expect(parses()).toBe(0);
  });

  it('the block field among the scanned fields: read from the scan, not parsed', () => {
    const rows = logs.map((l, i) => ({ ...l, block_number: String(100 + i) }));
    const { page, parses } = scannedPage({ result: { data: rows } }, ['block_number', 'log_index']);
    expect(new BlockSeek('block_number').blocksOf(page)).toEqual([100, 101]);
    expect(parses()).toBe(0);
  });

  it('the block field carried but not scanned: the entries are parsed and every block is read', () => {
    const rows = [{ ...logs[0], block_number: '7' }, logs[1]];
    const { page } = scannedPage({ result: { data: rows } }, ['transaction_hash']);
    expect(new BlockSeek('block_number').blocksOf(page)).toEqual([7, undefined]);
  });
});
