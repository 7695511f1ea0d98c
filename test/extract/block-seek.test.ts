// The pager's per-row range check reads each entry's block number; on a scanned body it must not parse the
// entries just to learn that they carry none (event logs): the scan already lists every key the entries have.
import fc from 'fast-check';
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

describe('BlockSeek.follow', () => {
  it('an entry without a readable block: the window fails with its code, naming the entry, instead of skipping rows', () => {
    const { page } = scannedPage({ result: { data: [{ block_number: '100' }, { block_number: 'n/a' }] } }, ['block_number']);
    const seek = new BlockSeek('block_number');
    expect(() => seek.follow(page, { from: 0, to: 1000 }, 10_000, 'transactions of 0xab')).toThrow(
      expect.objectContaining({
        code: 'CHAINLAKE_WINDOW',
        message: expect.stringContaining("an entry at offset 10000 of transactions of 0xab has no readable 'block_number'"),
      }),
    );
  });
});

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

  it('reads the same block numbers from the scanned bytes as from the parsed entries, whatever the values', () => {
    // JSON texts of a block field: digit strings (leading zeros, beyond 2^53), numbers in every form, and what is no block.
    const valueText = fc.oneof(
      fc.stringMatching(/^[0-9]{1,20}$/).map((d) => JSON.stringify(d)),
      fc.stringMatching(/^[1-9][0-9]{0,19}$/),
      fc.constantFrom('0', '-3', '1.0', '1e3', '2.5', '"-1"', '"1.5"', '""', '"0x10"', '" 7"', '"\\u0037"', 'true', 'null', '[]', '{}', '9007199254740993'),
    );
    fc.assert(
      fc.property(fc.array(fc.option(valueText, { nil: undefined }), { minLength: 1, maxLength: 20 }), (values) => {
        const text = `{"result":{"data":[${values.map((v, i) => `{"log_index":"${i}"${v === undefined ? '' : `,"block_number":${v}`}}`).join(',')}]}}`;
        const body = JSON.parse(text) as { result: { data: unknown[] } };
        const bytes = Buffer.from(text);
        const list = scanList(bytes, ['result', 'data'], ['block_number', 'log_index']);
        if (!list) throw new Error('the body was not scanned');
        const scanned: FetchedPage = {
          size: list.count,
          raw: { bytes, entriesAt: ['result', 'data'], list, entries: [] },
          results: {},
          count: list.count,
          offset: 0,
          entries: [],
        };
        const parsed: FetchedPage = { entries: body.result.data, results: {}, count: list.count, offset: 0 };
        const seek = new BlockSeek('block_number');
        expect(seek.blocksOf(scanned)).toEqual(seek.blocksOf(parsed));
      }),
      { numRuns: 300, seed: 34 },
    );
  });
});
