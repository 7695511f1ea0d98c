import { describe, expect, it } from 'vitest';
import { DATASETS } from '../../src/datasets/registry.js';
import { replaceable, scopeRowsCondition } from '../../src/datasets/scope-rows.js';

describe('scope rows', () => {
  it('every block-ranged endpoint of a dataset with a block column declares the columns its scope filters on', () => {
    const ranged = Object.values(DATASETS).flatMap((def) => def.endpoints.filter((e) => e.blockRange && def.blockColumn).map((e) => ({ def, e })));
    expect(ranged.length).toBeGreaterThanOrEqual(5);
    for (const { def, e } of ranged) {
      expect(replaceable(def, e), `${def.name}/${e.id}`).toBe(true);
      for (const cols of Object.values(e.scopeColumns!))
        for (const c of cols)
          expect(
            def.columns.map((x) => x.name),
            `${def.name}/${e.id}`,
          ).toContain(c);
    }
  });

  it('windows of one endpoint and range share one IN list, values lower-cased, the endpoint named where rows record it', () => {
    const def = DATASETS.erc721_transfers!;
    const e = def.endpoints[0]!;
    const sql = scopeRowsCondition(def, [
      { endpoint: e, scope: { address: '0xAB' }, range: { from: 5, to: 9 } },
      { endpoint: e, scope: { address: '0xcd' }, range: { from: 5, to: 9 } },
    ]);
    expect(sql).toBe(
      `("block_number" BETWEEN 5 AND 9 AND (("sender" IN ('0xab', '0xcd') OR "receiver" IN ('0xab', '0xcd'))) AND "origin_endpoint" = '${e.id}')`,
    );
    expect(
      scopeRowsCondition(DATASETS.event_logs!, [{ endpoint: DATASETS.event_logs!.endpoints[0]!, scope: { contract: '0x1' }, range: { from: 1, to: 2 } }]),
    ).toBeUndefined();
  });
});
