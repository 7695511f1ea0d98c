import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KINDS } from '../../src/transform/kinds.js';
import { DATASETS } from '../../src/datasets/registry.js';
import { Accounting } from '../../src/extract/accounting.js';
import { ExplorerClient } from '../../src/extract/explorer.js';
import { FinanceClient } from '../../src/extract/finance.js';
import { pageWindow, WindowProgress } from '../../src/extract/pager.js';
import { HttpTransport } from '../../src/extract/transport.js';
import { fetcherFor, type Clients } from '../../src/pipeline/execute.js';
import { parseJob } from '../../src/pipeline/job.js';
import { planWindows } from '../../src/pipeline/plan.js';
import { OrdinalState, RowTransformer } from '../../src/transform/rows.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { allDatasetsSpec } from './helpers.js';

let sim: RunningSimulator;
let transport: HttpTransport;
let clients: Clients;

beforeAll(async () => {
  sim = await startSimulator({ seed: 3 });
  transport = new HttpTransport({ concurrency: 4, retry: { maxAttempts: 2, baseDelayMs: 10 } });
  clients = {
    explorer: new ExplorerClient(transport, { baseUrl: sim.urls.mainnet, apiKey: sim.apiKey, network: 'mainnet' }),
    finance: new FinanceClient(transport, { baseUrl: sim.urls.finance }),
  };
});

afterAll(async () => {
  await transport?.close();
  await sim?.close();
});

describe('dataset declarations', () => {
  it('are consistent: keys, sort and partition columns exist, names are snake_case, every column has a doc', () => {
    for (const def of Object.values(DATASETS)) {
      const names = new Set(def.columns.flatMap((c) => (c.kind === 'amount' ? [c.name, `${c.name}_raw`] : [c.name])));
      expect(names.size, def.name).toBe(def.columns.length + def.columns.filter((c) => c.kind === 'amount').length);
      for (const k of [...def.naturalKey, ...def.sortBy]) expect(names.has(k), `${def.name}: ${k}`).toBe(true);
      for (const c of def.columns) {
        expect(c.name, def.name).toMatch(/^[a-z][a-z0-9_]*$/);
        expect(c.doc.length, `${def.name}.${c.name}`).toBeGreaterThan(5);
        expect(KINDS[c.kind].lakeType).toBeDefined();
      }
      expect(new Set(def.endpoints.map((e) => e.id)).size, def.name).toBe(def.endpoints.length);
      // Constructing the transformer validates ordinals, patterns and partition sources.
      expect(() => new RowTransformer(def, { network: 'mainnet', snapshotDate: '2024-01-01' })).not.toThrow();
    }
  });

  it('convert every entry of every endpoint of the simulator with no reject and no unknown field', async () => {
    const spec = allDatasetsSpec(sim.examples, { everyEndpoint: true });
    const job = parseJob({ name: 'decl', target: 'simulator', range: { fromBlock: sim.head() - 3000 }, datasets: spec }, 'test', process.env);
    const windows = planWindows(job.what, sim.head());
    const seen = new Set<string>();
    const counts = new Map<string, number>();
    for (const w of windows) {
      const t = new RowTransformer(w.def, { network: 'mainnet', snapshotDate: '2024-01-01' });
      const ordinals = w.def.ordinal ? new OrdinalState() : undefined;
      const acct = new Accounting();
      const fetcher = fetcherFor(w, clients);
      const pages =
        w.endpoint.paging.kind === 'offset'
          ? pageWindow(fetcher, w.range, { pageSize: 1000, resultWindow: 10_000, prefetch: 2, maxDriftRetries: 2 }, acct, new WindowProgress())
          : (async function* () {
              yield await fetcher({ offset: 0, limit: 1000, range: w.range }, acct);
            })();
      for await (const page of pages) {
        const r = t.transform(page.entries, w.id, {
          scope: w.scope,
          results: page.results,
          meta: (page as { meta?: Record<string, unknown> }).meta,
          offset: page.offset,
          fields: w.endpoint.entryFields,
          ordinals,
        });
        expect(r.rejects, `${w.id}: ${JSON.stringify(r.rejects[0])}`).toEqual([]);
        counts.set(`${w.def.name}/${w.endpoint.id}`, (counts.get(`${w.def.name}/${w.endpoint.id}`) ?? 0) + r.rows.length);
      }
      expect([...t.unknownFields.keys()], w.id).toEqual([]);
      seen.add(`${w.def.name}/${w.endpoint.id}`);
    }
    // Every endpoint of every dataset was exercised, and gave rows.
    const all = Object.values(DATASETS).flatMap((d) => d.endpoints.map((e) => `${d.name}/${e.id}`));
    expect([...seen].sort()).toEqual(all.sort());
    for (const k of all) expect(counts.get(k), k).toBeGreaterThan(0);
  });
});
