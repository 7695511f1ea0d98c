// Seed 1 is a contract: jobs/demo.json, the README and other suites name its addresses and hashes. Any change to
// the generator that moves these bytes must be deliberate (update the demo job and these digests together).
import { createHash } from 'node:crypto';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { get } from './helpers.js';

let sim: RunningSimulator;
beforeAll(async () => { sim = await startSimulator({ seed: 1, scale: 'small' }); });
afterAll(async () => { await sim.close(); });

const sha = (s: string): string => createHash('sha256').update(s).digest('hex');

describe('seed 1 is stable', () => {
  it('examples', () => {
    expect(sim.examples).toEqual({
      addresses: ['0x36b8f7473cdaa8441b4aa383dd6757c5603d8b8c', '0x235cc9e6a7b9bac03056f3eb7034c30bd80a5157',
        '0x86024fd52bd9a84f6ba8cb499555b9ce10959591', '0x00671712d3cd244c79a1ebf9b8817f1a663a31ef',
        '0xaf273689c318ca16253af94ce5430173f424d98f', '0x347c9cb70a1bd9474035f751f2c4c74f0575dfc7'],
      whale: '0x5e00882342b0185f59c0fea380530b4f57419b74',
      miner: '0x732b4337622e727d3fdc7e7c91ff6a7bb02eef97',
      erc20Token: '0xd34198f9efc7fd39f0334e76b929f8e3059a6eed',
      erc721Token: '0x9cc99d101e0611326eda80e559e8cd2c3e6b8fc7',
      nftHolder: '0x5734701a01bde21c1845982bd2bd69d5428a3ac2',
      verifiedContract: '0x99959c7c941ae1ad906e192dda6a96d5b06a5017',
      unverifiedContract: '0x8f6984cc7f23306c980ed36b98062b20db49bb4c',
      transactionHash: '0x5e05238d036c7c4e3ef4afb71c94de487f7dceec2a5e915363aa69cfaa3d9593',
      failedTransactionHash: '0x8322eff9e125254bc03183da9590e21ad4eed3b1bec6b38800aa993feca4b7bb',
      internalTransactionHash: '0x7c1ccd48d7928a8c5ba7272eb719cb258a30ae63d2dd346c8c94a17283a322ed',
      transferTopic: '0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef',
      block: 20373,
      pools: ['0x99959c7c941ae1ad906e192dda6a96d5b06a5017', '0x01f68e59556ecb51f923e101dbf27277035c5642',
        '0xf15e53b3decc340e6f18fe51c38f1e2a846e09f8', '0x594a7e94190c1210298d0701f97f5f61dac3b095'],
      pids: [0, 1],
      crowdedBlockAddress: '0x11f2dee471c1ef2e28dbdc22390e710b297cbe38',
      crowdedBlock: 21607,
    });
    expect(sim.head()).toBe(36_000);
  });

  it('response bytes', async () => {
    const ex = sim.examples;
    const h = { 'api-key': sim.apiKey };
    const pages: [string, string][] = [
      [`/v1/accounts/${ex.whale}/transactions?limit=1000&startBlock=10000&endBlock=12000&input=true`, '08bcb2a65c68467ae70f06c14f94bfce4138b35324972b88df35729296c97d89'],
      [`/v1/accounts/${ex.whale}/internal-transactions?limit=1000&startBlock=10000&endBlock=12000`, '9229af6f4f2d2be7821d777a71c49a4f84f06e96bb9c44bb8064a8493272148b'],
      [`/v1/event-logs?address=${ex.erc20Token}&topic_0=${ex.transferTopic}&limit=1000&start_block=0&end_block=20000`, '06502f028478d42f5dbf287ec09eed268696107e976d4a9ce11f948647d13bfb'],
    ];
    for (const [p, digest] of pages) expect(sha((await get(sim.urls.mainnet + p, h)).text), p).toBe(digest);
    // The transaction listing's other shapes (digests taken before its byte writer was optimised).
    const txPages: [string, string][] = [
      [`/v1/accounts/${ex.whale}/transactions?limit=1000&startBlock=20000&endBlock=22000&simple=true`, '8c4aa210d175d378305b6e216bbb199c9a6e8b39abdda6ae4a39df5c2c444ba6'],
      [`/v1/accounts/${ex.whale}/transactions?limit=1000&offset=1000&startBlock=0&endBlock=30000`, 'abf7a78356cf7af93090881feac78fbdcd74cc325f5148695227c2d91a4f48d5'],
      [`/v1/accounts/${ex.addresses[0]}/transactions?limit=1000&condition=from`, '746fd8df408bf8059e537f9a65bd43fb1c9e5802eb69728742cbc35b0040b733'],
    ];
    for (const [p, digest] of txPages) expect(sha((await get(sim.urls.mainnet + p, h)).text), p).toBe(digest);
    expect(sha((await get(sim.urls.finance + '/dashboard/overview')).text)).toBe('7544ef63929ba1842e746f64aa5ecdc6c6a415d48e1b5bd6b4da28af15768fdd');
  });

  it('pipelined pages are the bytes of the same pages fetched one at a time', async () => {
    // Listing pages are written into buffers that are reused once the socket has taken them. Requests
    // pipelined on one connection whose client does not read yet keep many pages queued in the server (more
    // than the kernel's socket buffers hold): none may be overwritten by a page rendered after it.
    const url = new URL(sim.urls.mainnet);
    const paths = Array.from({ length: 12 }, (_, i) =>
      `${url.pathname}/v1/accounts/${sim.examples.whale}/transactions?limit=1000&startBlock=${i * 2000}&endBlock=${i * 2000 + 1999}&input=true`);
    const s = net.connect(Number(url.port), url.hostname);
    s.pause();
    s.write(paths.map((p, i) => `GET ${p} HTTP/1.1\r\nhost: ${url.host}\r\napi-key: ${sim.apiKey}\r\n${i === paths.length - 1 ? 'connection: close\r\n' : ''}\r\n`).join(''));
    await new Promise((r) => setTimeout(r, 500));
    const chunks: Buffer[] = [];
    for await (const c of s) chunks.push(c as Buffer);
    const all = Buffer.concat(chunks);
    const bodies: string[] = [];
    for (let at = 0; at < all.length;) {
      const headEnd = all.indexOf('\r\n\r\n', at);
      const head = all.subarray(at, headEnd).toString('latin1');
      expect(head.startsWith('HTTP/1.1 200')).toBe(true);
      const length = Number(/content-length: (\d+)/i.exec(head)![1]);
      bodies.push(all.subarray(headEnd + 4, headEnd + 4 + length).toString('latin1'));
      at = headEnd + 4 + length;
    }
    expect(bodies.length).toBe(paths.length);
    for (let i = 0; i < paths.length; i++) {
      const alone = await get(`${url.origin}${paths[i]!}`, { 'api-key': sim.apiKey });
      expect(bodies[i]!.length).toBeGreaterThan(500_000);
      expect(sha(bodies[i]!), paths[i]).toBe(sha(alone.text));
    }
  });
});
