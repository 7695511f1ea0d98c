import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { erc20_transfers } from '../../src/datasets/erc20_transfers.js';
import { nft_inventory } from '../../src/datasets/nft_inventory.js';
import { OrdinalOrderError, OrdinalState, RowTransformer, type PageContext } from '../../src/transform/rows.js';

/** Transfer entries as the explorer lists them: newest block first, a transaction's entries together. */
const addresses = ['0x' + 'a'.repeat(40), '0x' + 'B'.repeat(40), '0x' + 'c'.repeat(40)];
const entryArb = fc.record({
  sender: fc.constantFrom(...addresses),
  receiver: fc.constantFrom(...addresses),
  value: fc.constantFrom('1', '5', String(2n ** 256n - 1n)),
  token: fc.constantFrom('0x' + 'd'.repeat(40), '0x' + 'E'.repeat(40)),
});
const txArb = fc.array(entryArb, { minLength: 1, maxLength: 5 });
const listingArb = fc.array(txArb, { minLength: 1, maxLength: 12 }).map((txs) =>
  txs.flatMap((entries, t) =>
    entries.map((e) => ({
      timestamp: '2024-03-01T00:00:00Z',
      block_number: String(1000 - Math.floor(t / 2)),
      transaction_index: String(9 - (t % 2)),
      transaction_hash: '0x' + t.toString(16).padStart(64, '0'),
      block_hash: null,
      token_address: e.token,
      sender: e.sender,
      receiver: e.receiver,
      value: e.value,
      token_name: null,
      token_symbol: null,
      token_decimals: null,
      confirmations: '1',
    })),
  ),
);

function keysOf(entries: Record<string, unknown>[], pageSizes: number[]): string[] {
  const t = new RowTransformer(erc20_transfers, { network: 'mainnet', snapshotDate: '2024-01-01' });
  const ordinals = new OrdinalState();
  const keys: string[] = [];
  let offset = 0;
  for (let i = 0; offset < entries.length; i++) {
    const size = pageSizes[i % pageSizes.length]!;
    const page: PageContext = { scope: {}, results: {}, offset, ordinals };
    const r = t.transform(entries.slice(offset, offset + size), 'w', page);
    expect(r.rejects).toEqual([]);
    for (const row of r.rows) {
      const v = row.values;
      keys.push(erc20_transfers.naturalKey.map((k) => String(v[k])).join('/'));
    }
    offset += size;
  }
  return keys;
}

describe('ordinals of entries without a unique id', () => {
  it('give every entry a unique key, whatever the page boundaries', () => {
    fc.assert(
      fc.property(listingArb, fc.array(fc.integer({ min: 1, max: 7 }), { minLength: 1, maxLength: 4 }), (entries, sizes) => {
        const keys = keysOf(entries, sizes);
        expect(keys.length).toBe(entries.length);
        expect(new Set(keys).size).toBe(entries.length);
        expect(keys).toEqual(keysOf(entries, [1000]));
      }),
    );
  });

  it('are the same from any scope that lists the entries (a subset keeps its keys)', () => {
    fc.assert(
      fc.property(listingArb, fc.constantFrom(...addresses), (entries, who) => {
        const all = new Set(keysOf(entries, [1000]));
        const mine = entries.filter((e) => e.sender === who || e.receiver === who);
        for (const k of keysOf(mine, [3])) expect(all.has(k), k).toBe(true);
      }),
    );
  });

  it('are the same for a page accepted as received as for its entries converted one by one', () => {
    // acceptRaw numbers a page's entries by index with one identity function: a group's first entry must be
    // judged by its own values when a second entry of its group comes, even pages later.
    const endpoint = erc20_transfers.endpoints[0]!.id;
    const ordinalsOf = (entries: Record<string, unknown>[], sizes: number[], accept: boolean): number[] => {
      const t = new RowTransformer(erc20_transfers, { network: 'mainnet', snapshotDate: '2024-01-01' });
      const ordinals = new OrdinalState();
      const out: number[] = [];
      for (let i = 0, offset = 0; offset < entries.length; i++) {
        const slice = entries.slice(offset, offset + sizes[i % sizes.length]!);
        const bytes = Buffer.from(JSON.stringify({ status: '1', message: 'OK', results: { data: slice } }));
        const page: PageContext = {
          scope: {},
          results: {},
          meta: { endpoint },
          offset,
          ordinals,
          raw: { bytes, entriesAt: ['results', 'data'], entries: slice },
        };
        if (accept) {
          const accepted = t.acceptRaw(slice, page);
          expect(accepted, 'the page is accepted as received').toBeDefined();
          out.push(...accepted!.ordinals!);
        } else out.push(...t.transform(slice, 'w', page).rows.map((r) => Number(r.values.ordinal)));
        offset += slice.length;
      }
      return out;
    };
    fc.assert(
      // Amounts beyond DECIMAL(38) go through the converters: here every page is accepted as received.
      fc.property(
        listingArb.map((es) => es.map((e) => (e.value.length > 38 ? { ...e, value: '9' } : e))),
        fc.array(fc.integer({ min: 1, max: 7 }), { minLength: 1, maxLength: 4 }),
        (entries, sizes) => {
          expect(ordinalsOf(entries, sizes, true)).toEqual(ordinalsOf(entries, sizes, false));
        },
      ),
    );
  });

  it('refuse a listing that splits a transaction’s entries apart', () => {
    const [a, b] = [0, 1].map((t) => ({
      timestamp: '2024-03-01T00:00:00Z',
      block_number: String(10 - t),
      transaction_index: '0',
      transaction_hash: '0x' + String(t).padStart(64, '0'),
      token_address: addresses[0],
      sender: addresses[0],
      receiver: addresses[1],
      value: '1',
    }));
    expect(() => keysOf([a!, b!, a!], [1000])).toThrow(OrdinalOrderError);
  });

  it('restart with each part of a window (offset 0)', () => {
    const e = {
      timestamp: '2024-03-01T00:00:00Z',
      block_number: '5',
      transaction_index: '0',
      transaction_hash: '0x' + '1'.repeat(64),
      token_address: addresses[0],
      sender: addresses[0],
      receiver: addresses[1],
      value: '1',
    };
    const t = new RowTransformer(erc20_transfers, { network: 'mainnet', snapshotDate: '2024-01-01' });
    const ordinals = new OrdinalState();
    const first = t.transform([e, e], 'w', { scope: {}, results: {}, offset: 0, ordinals });
    const again = t.transform([e, e], 'w', { scope: {}, results: {}, offset: 0, ordinals });
    expect(first.rows.map((r) => r.values.ordinal)).toEqual(['0', '1']);
    expect(again.rows.map((r) => r.values.ordinal)).toEqual(['0', '1']);
  });
});

describe('entry field mapping and patterns', () => {
  const t = () => new RowTransformer(nft_inventory, { network: 'mainnet', snapshotDate: '2024-01-01' });
  const fields = nft_inventory.endpoints.find((e) => e.id === 'token_inventory')!.entryFields;

  it('fills fields from the scope and the results, keeps the API entry in rejects', () => {
    const page: PageContext = {
      scope: { token: '0x' + 'f'.repeat(40) },
      results: { token_name: 'Punks', token_symbol: 'P' },
      meta: { endpoint: 'token_inventory' },
      fields,
    };
    const r = t().transform([{ holder_address: addresses[1], token_id: '7', token_uri: null }], 'w', page);
    expect(r.rows[0]!.values).toMatchObject({
      token_address: '0x' + 'f'.repeat(40),
      holder_address: '0x' + 'b'.repeat(40),
      token_name: 'Punks',
      origin_endpoint: 'token_inventory',
    });
    const bad = t().transform([{ holder_address: addresses[1], token_id: '0x07', token_uri: null }], 'w', page);
    expect(bad.rejects[0]).toMatchObject({ field: 'token_id', raw_value: '0x07' });
    expect(JSON.parse(bad.rejects[0]!.entry)).toEqual({ holder_address: addresses[1], token_id: '0x07', token_uri: null });
  });

  it('any uint256 decimal token id passes the pattern exactly; anything else is a reject, never an exception', () => {
    const page: PageContext = { scope: { token: '0x' + 'f'.repeat(40) }, results: {}, meta: { endpoint: 'x' }, fields };
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 2n ** 256n - 1n }), (id) => {
        const r = t().transform([{ holder_address: addresses[0], token_id: id.toString() }], 'w', page);
        expect(r.rows[0]!.values.token_id).toBe(id.toString());
      }),
    );
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string().filter((s) => !/^\d{1,78}$/.test(s)),
          fc.constant(null),
          fc.object(),
        ),
        (id) => {
          const r = t().transform([{ holder_address: addresses[0], token_id: id }], 'w', page);
          expect(r.rows).toEqual([]);
          expect(r.rejects.length).toBe(1);
        },
      ),
    );
  });
});
