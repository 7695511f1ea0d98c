import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { A_WHALE, Chain, N_BUSY, A_BUSY0, K_CREATE, NONE, N_ERC20, N_ERC721 } from '../../src/simulator/chain.js';
import { ByteOut } from '../../src/simulator/bytes.js';
import { chainFor, startSimulator } from '../../src/simulator/index.js';
import { renderTx, renderTxSimple, tokenAmount, tokenAmountHex, tokenIdHex, writeTx, writeTxSimple } from '../../src/simulator/render.js';
import { writeAmount, writeAmountHex, writeTokenIdHex } from '../../src/simulator/render-logs.js';
import { keccak256Hex, toChecksumAddress } from '../../src/evm/keccak.js';
import { mix32, unmix32 } from '../../src/simulator/rng.js';
import { get } from './helpers.js';

const chain = chainFor(1, 'small', 'mainnet');

describe('chain model', () => {
  it('has a whale of at least 100k transactions, busy addresses and a crowded block', () => {
    const n = (a: number): number => chain.idxAll.off[a + 1]! - chain.idxAll.off[a]!;
    const visible = (a: number): number =>
      chain.range(chain.idxAll, a, (t) => chain.txBlk[t]!, 0, chain.head)[1] - chain.range(chain.idxAll, a, (t) => chain.txBlk[t]!, 0, chain.head)[0];
    expect(visible(A_WHALE)).toBeGreaterThanOrEqual(100_000);
    for (let i = 0; i < N_BUSY; i++) {
      expect(n(A_BUSY0 + i)).toBeGreaterThan(200);
      expect(n(A_BUSY0 + i)).toBeLessThan(10_000);
    }
    // no single block of the whale exceeds the result window
    const ids = chain.idxAll.ids.subarray(chain.idxAll.off[A_WHALE]!, chain.idxAll.off[A_WHALE + 1]!);
    let run = 1,
      maxRun = 1;
    for (let i = 1; i < ids.length; i++) {
      run = chain.txBlk[ids[i]!] === chain.txBlk[ids[i - 1]!] ? run + 1 : 1;
      maxRun = Math.max(maxRun, run);
    }
    expect(maxRun).toBeLessThan(1000); // far below the result window
  });

  it('indexes are sorted, complete and consistent with the columns', () => {
    let unsorted = 0;
    for (let t = 1; t < chain.nTx; t++) if (chain.txBlk[t]! < chain.txBlk[t - 1]!) unsorted++;
    let total = 0;
    for (let a = 0; a < chain.numAddr; a++) {
      const o0 = chain.idxFrom.off[a]!,
        o1 = chain.idxFrom.off[a + 1]!;
      total += o1 - o0;
      for (let k = o0 + 1; k < o1; k++) if (chain.idxFrom.ids[k]! <= chain.idxFrom.ids[k - 1]!) unsorted++;
      for (let k = o0; k < o1; k++) if (chain.txFrom[chain.idxFrom.ids[k]!] !== a) unsorted++;
    }
    expect(unsorted).toBe(0);
    expect(total).toBe(chain.nTx);
    fc.assert(
      fc.property(fc.integer({ min: 0, max: chain.nTx - 1 }), (t) => {
        const f = chain.txFrom[t]!;
        const list = chain.idxAll.ids.subarray(chain.idxAll.off[f]!, chain.idxAll.off[f + 1]!);
        expect(list.includes(t)).toBe(true);
        expect(chain.findTx(chain.txHash(t))).toBe(t);
        expect(chain.findTx(chain.txHash(t).toUpperCase().replace('0X', '0x'))).toBe(t);
        expect(chain.findAddress(chain.addrCase(f, 1))).toBe(f);
        if ((chain.txKind[t]! & 15) === K_CREATE) expect(chain.txTo[t]).not.toBe(NONE);
      }),
      { numRuns: 300 },
    );
    expect(chain.findAddress('0x' + '12'.repeat(20))).toBe(-1);
    expect(chain.findTx('0x' + '12'.repeat(32))).toBe(-1);
  });

  it('nonces count the sender transactions', () => {
    const ids = chain.idxFrom.ids.subarray(chain.idxFrom.off[A_WHALE]!, chain.idxFrom.off[A_WHALE]! + 50);
    ids.forEach((t, i) => expect(chain.nonceOf(t)).toBe(i));
    fc.assert(
      fc.property(fc.integer({ min: 0, max: chain.nTx - 1 }), (t) => {
        const f = chain.txFrom[t]!;
        let earlier = 0;
        for (let k = chain.idxFrom.off[f]!; k < chain.idxFrom.off[f + 1]!; k++) if (chain.idxFrom.ids[k]! < t) earlier++;
        expect(chain.nonceOf(t)).toBe(earlier);
      }),
      { numRuns: 300 },
    );
  });

  it('the byte writer renders exactly what the string renderer does', () => {
    const out = new ByteOut();
    const visible = chain.blockFirstTx[chain.head + 1]!;
    fc.assert(
      fc.property(fc.integer({ min: 0, max: visible - 1 }), fc.boolean(), (t, input) => {
        writeTx(out, chain, t, chain.head, input);
        expect(out.take().toString('latin1')).toBe(renderTx(chain, t, chain.head, input));
        writeTxSimple(out, chain, t, input);
        expect(out.take().toString('latin1')).toBe(renderTxSimple(chain, t, input));
      }),
      { numRuns: 500 },
    );
  });

  it('token amounts and ids written as bytes equal their BigInt string forms', () => {
    const out = new ByteOut();
    const text = (): string => out.take().toString('latin1');
    const units = fc.oneof(fc.constantFrom(0, 1, 99, 100, 2 ** 24 - 1, 2 ** 24, 2 ** 32 - 1), fc.integer({ min: 0, max: 2 ** 32 - 1 }));
    fc.assert(
      fc.property(fc.integer({ min: 0, max: N_ERC20 - 1 }), units, (tk, u) => {
        out.ensure(256);
        writeAmountHex(out, tk, u);
        expect(text()).toBe(tokenAmountHex(tk, u));
        out.ensure(256);
        writeAmount(out, tk, u);
        expect(text()).toBe(tokenAmount(tk, u));
      }),
      { numRuns: 2000 },
    );
    fc.assert(
      fc.property(fc.integer({ min: 0, max: N_ERC721 - 1 }), fc.integer({ min: 0, max: 2 ** 24 - 1 }), (nft, idx) => {
        out.ensure(256);
        writeTokenIdHex(out, chain, nft, idx);
        expect(text()).toBe(tokenIdHex(chain, nft, idx));
      }),
      { numRuns: 1000 },
    );
  });

  it('hash helpers: keccak vectors, EIP-55 and the invertible mix', () => {
    expect(keccak256Hex('')).toBe('0xc5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470');
    expect(keccak256Hex('Transfer(address,address,uint256)')).toBe('0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef');
    // The EIP-55 examples, and keccak over 0..399 bytes (one to three blocks; digest of the original version).
    for (const a of [
      '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed',
      '0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359',
      '0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB',
      '0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb',
    ]) {
      expect(toChecksumAddress(a.toLowerCase())).toBe(a);
    }
    const all = createHash('sha256');
    for (let n = 0; n < 400; n++) all.update(keccak256Hex(Buffer.alloc(n, n & 0xff)));
    expect(all.digest('hex')).toBe('9b91a3703bf46a926ddb8bdc4bcb078a5696004b8a3ad97cc0dad7244d3b727c');
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 0xffffffff }), (x) => {
        expect(unmix32(mix32(x))).toBe(x);
      }),
    );
  });

  it('seeds and networks give different chains; the same seed the same bytes', async () => {
    const other = new Chain('mainnet', 2, 'small');
    expect(other.addrLower(A_WHALE)).not.toBe(chain.addrLower(A_WHALE));
    expect(chainFor(1, 'small', 'testnet').addrLower(A_WHALE)).not.toBe(chain.addrLower(A_WHALE));
    const a = await startSimulator({ seed: 5 });
    const b = await startSimulator({ seed: 5 });
    try {
      expect(b.examples).toEqual(a.examples);
      for (const p of [
        `/v1/accounts/${a.examples.whale}/internal-transactions?limit=200`,
        `/v1/accounts/${a.examples.nftHolder}/tokens`,
        `/v1/event-logs?address=${a.examples.erc20Token}&topic_0=${a.examples.transferTopic}&limit=100`,
      ]) {
        const x = await get(a.urls.mainnet + p, { 'api-key': a.apiKey });
        const y = await get(b.urls.mainnet + p, { 'api-key': b.apiKey });
        expect(x.status).toBe(200);
        expect(y.text).toBe(x.text);
      }
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('rejects bad options', async () => {
    await expect(startSimulator({ scale: 'huge' as never })).rejects.toThrow(/scale/);
    await expect(startSimulator({ seed: -1 })).rejects.toThrow(/seed/);
    await expect(startSimulator({ resultWindow: 0 })).rejects.toThrow(/resultWindow/);
    await expect(startSimulator({ faults: { rate: 2 } })).rejects.toThrow(/rate/);
    await expect(startSimulator({ faults: { rate: 0.5, kinds: ['boom' as never] } })).rejects.toThrow(/boom/);
  });

  it('a smaller result window applies', async () => {
    const s = await startSimulator({ resultWindow: 500 });
    try {
      const r = await get(`${s.urls.mainnet}/v1/accounts/${s.examples.whale}/transactions?limit=400&offset=200`, { 'api-key': s.apiKey });
      expect(r.status).toBe(400);
      expect(r.json.message).toBe('Result window is too large, offset + limit must be less than or equal to 500');
    } finally {
      await s.close();
    }
  });

  it('custom api key', async () => {
    const s = await startSimulator({ apiKey: 'k-123' });
    try {
      expect((await get(`${s.urls.mainnet}/v1/blocks/1`, { 'api-key': 'k-123' })).status).toBe(200);
      expect((await get(`${s.urls.mainnet}/v1/blocks/1`, { 'api-key': 'chainlake-simulator-key' })).status).toBe(403);
    } finally {
      await s.close();
    }
  });
});
