// The simulator's standard token events and the Showcase contract: real ABI encodings (viem decodes them),
// placed after each block's own logs, and the malformed Transfer logs beside an ERC-20's real ones.
import { decodeEventLog, toEventSelector, type AbiEvent } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { A_ERC20_0, A_ERC721_0 } from '../../src/simulator/chain.js';
import { chainFor, startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { A_MULTI, A_ODD_ERC20, A_SHOWCASE, PING_CHANNEL, showcaseEvents, STANDARD_SIGNATURES } from '../../src/simulator/token-events.js';
import { parseAbiItem } from 'viem';
import { api } from './helpers.js';

const SHOWCASE_EVENTS = showcaseEvents();
let sim: RunningSimulator;
beforeAll(async () => {
  sim = await startSimulator({ seed: 1, scale: 'small' });
});
afterAll(async () => {
  await sim.close();
});

const chain = chainFor(1, 'small', 'mainnet');
const addr = (i: number): string => chain.addrLower(i);
const topic = (sig: string): string => toEventSelector(parseAbiItem(sig) as AbiEvent);
const logs = async (contract: number, topic0: string): Promise<any[]> => {
  const r = await api(sim, `/v1/event-logs?address=${addr(contract)}&topic_0=${topic0}&limit=1000&start_block=0&end_block=36000`);
  expect(r.status, r.text.slice(0, 300)).toBe(200);
  return r.json.results.data;
};
const topicsOf = (l: any): `0x${string}`[] => [l.topic_0, l.topic_1, l.topic_2, l.topic_3].filter((t) => t !== null);

describe('standard token events', () => {
  it('ERC-1155 TransferSingle and TransferBatch decode with viem, newest first, after the block’s own logs', async () => {
    const single = await logs(A_MULTI, topic(STANDARD_SIGNATURES.transferSingle));
    const batch = await logs(A_MULTI, topic(STANDARD_SIGNATURES.transferBatch));
    expect(single.length).toBeGreaterThan(100);
    expect(batch.length).toBeGreaterThan(20);
    for (const l of [...single, ...batch]) {
      const d = decodeEventLog({
        abi: [parseAbiItem(STANDARD_SIGNATURES.transferSingle), parseAbiItem(STANDARD_SIGNATURES.transferBatch)],
        topics: topicsOf(l) as never,
        data: l.data,
      });
      expect(['TransferSingle', 'TransferBatch']).toContain(d.eventName);
      if (d.eventName === 'TransferBatch') expect(d.args.ids.length).toBe(d.args.values.length);
      expect(l.topics_count).toBe(String(topicsOf(l).length));
    }
    const blocks = single.map((l) => Date.parse(l.timestamp));
    expect([...blocks].sort((a, b) => b - a)).toEqual(blocks);
  });

  it('ERC-20 Approval (with unlimited allowances) and ERC-721 Approval share a topic_0; ApprovalForAll carries a bool', async () => {
    const a20 = await logs(A_ERC20_0, topic(STANDARD_SIGNATURES.erc20Approval));
    expect(a20.length).toBeGreaterThan(10);
    const values = a20.map(
      (l) => decodeEventLog({ abi: [parseAbiItem(STANDARD_SIGNATURES.erc20Approval)], topics: topicsOf(l) as never, data: l.data }).args.value,
    );
    expect(values).toContain((1n << 256n) - 1n);
    const a721 = await logs(A_ERC721_0, topic(STANDARD_SIGNATURES.erc20Approval));
    expect(a721.length).toBeGreaterThan(0);
    for (const l of a721) {
      expect(l.topics_count).toBe('4');
      expect(l.data).toBe('0x');
    }
    const all = await logs(A_ERC721_0 + 1, topic(STANDARD_SIGNATURES.approvalForAll));
    expect(all.length).toBeGreaterThan(0);
    for (const l of all) expect(['0x' + '0'.repeat(63) + '0', '0x' + '0'.repeat(63) + '1']).toContain(l.data);
  });

  it('an ERC-20 lists malformed Transfer logs beside its real ones: an ERC-721-shaped one and one with short data', async () => {
    const t = await logs(A_ODD_ERC20, topic(STANDARD_SIGNATURES.erc20Transfer));
    const four = t.filter((l) => l.topics_count === '4');
    const short = t.filter((l) => l.topics_count === '3' && l.data.length !== 66);
    expect(four.length).toBeGreaterThan(0);
    expect(short.length).toBeGreaterThan(0);
    expect(t.length - four.length - short.length).toBeGreaterThan(100);
  });
});

describe('the Showcase contract', () => {
  it('serves its ABI (#14) and every event decodes with viem; Pinged is anonymous under its channel topic', async () => {
    const abi = (await api(sim, `/v1/contracts/${addr(A_SHOWCASE)}/abi`)).json.results.data;
    const events = abi.filter((i: any) => i.type === 'event');
    expect(events.map((e: any) => e.name)).toEqual(['Configured', 'Noted', 'Listed', 'Ordered', 'Pinged', 'Tagged']);
    const seen = new Set<string>();
    for (const e of SHOWCASE_EVENTS) {
      const got = await logs(A_SHOWCASE, e.anonymous ? PING_CHANNEL : toEventSelector(e));
      expect(got.length, e.name).toBeGreaterThan(5);
      for (const l of got) {
        if (e.name === 'Tagged') {
          expect(l.topics_count).toBe('4');
          continue;
        } // hashed indexed values: only the data decodes
        const d = decodeEventLog({ abi: [e], topics: topicsOf(l) as never, data: l.data, strict: true } as never) as { eventName?: string };
        if (!e.anonymous) expect(d.eventName).toBe(e.name);
        seen.add(e.name);
      }
    }
    expect(seen.size).toBe(5);
  });
});
