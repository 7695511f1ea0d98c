// Seed 1 is a contract: jobs/demo.json, the README and other suites name its addresses and hashes. Any change to
// the generator that moves these bytes must be deliberate (update the demo job and these digests together).
import { createHash } from 'node:crypto';
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
    expect(sha((await get(sim.urls.finance + '/dashboard/overview')).text)).toBe('7544ef63929ba1842e746f64aa5ecdc6c6a415d48e1b5bd6b4da28af15768fdd');
  });
});
