import { describe, expect, it } from 'vitest';
import { getDataset } from '../../src/datasets/registry.js';
import { scanList } from '../../src/extract/scan.js';
import { RowTransformer, type PageContext } from '../../src/transform/rows.js';

/** The `extra` column: an entry's fields that no column reads, kept as received (issue 20, point 6). */
const def = getDataset('event_logs');
const log = (i: number, more: string) =>
  `{"timestamp":"2025-01-0${i}T00:00:00Z","address":"0x${'a'.repeat(40)}","data":"0x","method":"0x","transaction_hash":"0x${String(i).repeat(64)}","transaction_index":"0","log_index":"${i}","topics_count":"1","topic_0":null,"topic_1":null,"topic_2":null,"topic_3":null,"log_name":null,"log_abi":null,"address_type":null,"address_extra":null${more}}`;

function page(texts: string[]): { entries: unknown[]; ctx: PageContext; bytes: Buffer } {
  const bytes = Buffer.from(`{"status":"200","message":"OK","results":{"count":"${texts.length}","data":[${texts.join(',')}]}}`);
  const entries = (JSON.parse(bytes.toString()) as { results: { data: unknown[] } }).results.data;
  return {
    entries,
    bytes,
    ctx: { scope: {}, results: {}, meta: { endpoint: 'event_logs' }, offset: 0, raw: { bytes, entriesAt: ['results', 'data'], entries } },
  };
}

describe('extra', () => {
  it('every dataset ends with a nullable JSON extra column', () => {
    for (const name of ['transactions', 'event_logs', 'contracts', 'stable_chart', 'dashboard']) {
      const last = getDataset(name).columns.at(-1)!;
      expect([last.name, last.kind, last.nullable, last.source]).toEqual(['extra', 'json', true, '$extra']);
    }
  });

  it('converted rows carry the unread fields exactly (nested values too), NULL when there are none', () => {
    const t = new RowTransformer(def, { network: 'mainnet', snapshotDate: '2025-01-01' });
    const { entries, ctx } = page([log(1, ',"id":"17","removed":false,"meta":{"b":[1,null],"a":"x"}'), log(2, '')]);
    const { rows, rejects } = t.transform(entries, 'w', ctx);
    expect(rejects).toEqual([]);
    expect(rows.map((r) => r.values.extra)).toEqual(['{"id":"17","removed":false,"meta":{"b":[1,null],"a":"x"}}', undefined]);
    expect([...t.unknownFields]).toEqual([
      ['id', 1],
      ['removed', 1],
      ['meta', 1],
    ]);
  });

  it('a page staged as received carries each entry’s extra beside it; a scan leaves such a page to the parsed entries', () => {
    const t = new RowTransformer(def, { network: 'mainnet', snapshotDate: '2025-01-01' });
    const { entries, ctx, bytes } = page([log(1, ',"id":"17"'), log(2, ''), log(3, ',"id":"19"')]);
    const fields = t.scanFields(def.endpoints[0]!)!;
    const list = scanList(bytes, ['results', 'data'], fields)!;
    expect(t.acceptScanned({ ...ctx, raw: { ...ctx.raw!, list } })).toBeUndefined();
    const accepted = t.acceptRaw(entries, ctx)!;
    expect(accepted.rows).toBe(3);
    expect(accepted.extras).toEqual(['{"id":"17"}', null, '{"id":"19"}']);
    expect(accepted.constants).not.toHaveProperty('extra');
    // Without unread fields, the scan accepts the page and no extras ride along.
    const plain = page([log(1, ''), log(2, '')]);
    const plainList = scanList(plain.bytes, ['results', 'data'], fields)!;
    const fromScan = t.acceptScanned({ ...plain.ctx, raw: { ...plain.ctx.raw!, list: plainList } })!;
    expect(fromScan.rows).toBe(2);
    expect(fromScan.extras).toBeUndefined();
  });
});
