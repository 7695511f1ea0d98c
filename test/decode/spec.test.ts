// The decode spec of a job file, ABIs and signatures: clear errors naming the key, datasets named and typed.
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { eventOfSignature, eventsOfAbi } from '../../src/decode/abi.js';
import { allColumns, STANDARD, STANDARD_TOPICS } from '../../src/decode/datasets.js';
import { toEventSelector } from 'viem';
import { resolveDatasets } from '../../src/decode/spec.js';
import { parseJob } from '../../src/pipeline/job.js';
import { tempDir } from '../helpers/lake.js';

const base = { target: 'simulator', datasets: { event_logs: { contracts: [{ address: '0x' + '1'.repeat(40), topics: ['0x' + '2'.repeat(64)] }] } } };
const jobError = (decode: unknown): string => {
  try {
    parseJob({ ...base, decode }, 'job.json', process.env);
  } catch (e) {
    return (e as Error).message;
  }
  throw new Error('no error');
};

describe('the decode key of a job', () => {
  it('names what is wrong and where', () => {
    expect(jobError({ standard: ['erc777'] })).toMatch(/decode\.standard\[0\].*unknown standard "erc777"/);
    expect(jobError({ standard: ['erc20'], tokens: ['0x12'] })).toMatch(/decode\.tokens\[0\].*must be an address/);
    expect(jobError({ contracts: [{ address: '0x' + 'a'.repeat(40), signatures: ['Swap(address indexed, uint999 x)'] }] })).toMatch(
      /decode\.contracts\[0\]\.signatures\[0\]/,
    );
    expect(jobError({ contracts: [{ address: '0x' + 'a'.repeat(40), abiFile: 'a.json', signatures: ['E(uint256 x)'] }] })).toMatch(
      /abiFile or signatures, not both/,
    );
    expect(jobError({ colour: 1 })).toMatch(/decode\.colour.*unknown key/);
    expect(jobError({})).toMatch(/names nothing to decode/);
    const ok = parseJob(
      {
        ...base,
        decode: {
          standard: ['erc20', 'erc1155'],
          contracts: [{ address: '0x' + 'A'.repeat(40), name: 'pair', signatures: ['Sync(uint112 reserve0, uint112 reserve1)'] }],
        },
      },
      '/jobs/x.json',
      process.env,
    );
    expect(ok.what.decode).toEqual({
      standard: ['erc20', 'erc1155'],
      tokens: undefined,
      contracts: [
        { address: '0x' + 'a'.repeat(40), name: 'pair', abiFile: undefined, signatures: ['Sync(uint112 reserve0, uint112 reserve1)'], events: undefined },
      ],
    });
  });
});

describe('ABIs and signatures', () => {
  it('the standard events’ topic_0 constants are viem’s selectors of their signatures', () => {
    for (const d of Object.values(STANDARD)) for (const s of d.sources) expect(s.topic0, s.label).toBe(toEventSelector(s.event));
    expect(Object.keys(STANDARD_TOPICS).sort()).toEqual(['Approval', 'ApprovalForAll', 'Transfer', 'TransferBatch', 'TransferSingle']);
  });

  it('a signature with or without "event", names optional, a trailing "anonymous"', () => {
    const e = eventOfSignature('Swap(address indexed sender, uint256 amount0In, uint256, address indexed to)');
    expect(e.name).toBe('Swap');
    expect(e.inputs.map((p) => [p.type, p.name, (p as { indexed?: boolean }).indexed])).toEqual([
      ['address', 'sender', true],
      ['uint256', 'amount0In', undefined],
      ['uint256', undefined, undefined],
      ['address', 'to', true],
    ]);
    expect(eventOfSignature('event Ping(bytes32 indexed c, uint64 n) anonymous').anonymous).toBe(true);
    expect(() => eventOfSignature('Swap(address indexed sender')).toThrow(/event signature "Swap\(address indexed sender"/);
    expect(() => eventsOfAbi('{"x": 1}', 'f.json')).toThrow(/f\.json: an ABI is a JSON array/);
    expect(() => eventsOfAbi('[{"type": "event", "inputs": []}]', 'f.json')).toThrow(/f\.json\[0\]: an event needs a name/);
    expect(
      eventsOfAbi(
        {
          abi: [
            { type: 'function', name: 'f', inputs: [] },
            { type: 'event', name: 'E', inputs: [], anonymous: false },
          ],
        },
        'x',
      ),
    ).toHaveLength(1);
  });

  it('an ABI file gives one dataset per event, overloaded names told apart, columns typed', async () => {
    const { dir, cleanup } = await tempDir();
    try {
      const file = path.join(dir, 'pair.json');
      await writeFile(
        file,
        JSON.stringify([
          {
            type: 'event',
            name: 'Sync',
            anonymous: false,
            inputs: [
              { name: 'reserve0', type: 'uint112' },
              { name: 'reserve1', type: 'uint112' },
            ],
          },
          { type: 'event', name: 'Moved', anonymous: false, inputs: [{ name: 'who', type: 'address', indexed: true }] },
          {
            type: 'event',
            name: 'Moved',
            anonymous: false,
            inputs: [
              { name: 'who', type: 'address', indexed: true },
              { name: 'tags', type: 'string[]', indexed: true },
              { name: 'n', type: 'int24' },
            ],
          },
        ]),
      );
      const ds = await resolveDatasets(
        { standard: [], contracts: [{ address: '0x' + 'b'.repeat(40), name: 'SwapPair', abiFile: file }] },
        { network: 'mainnet' },
      );
      expect(ds.map((d) => d.name)).toEqual(['swap_pair_sync', 'swap_pair_moved1', 'swap_pair_moved3']);
      expect(allColumns(ds[2]!).map((c) => `${c.name} ${c.type}`)).toEqual([
        'contract_address VARCHAR',
        'timestamp TIMESTAMP WITH TIME ZONE',
        'transaction_hash VARCHAR',
        'transaction_index BIGINT',
        'log_index BIGINT',
        'who VARCHAR',
        'tags_hash VARCHAR',
        'n INTEGER',
        '_run_id VARCHAR',
        '_ingested_at TIMESTAMP WITH TIME ZONE',
      ]);
      expect(ds[1]!.sources[0]!.topic0).not.toBe(ds[2]!.sources[0]!.topic0);
      await expect(
        resolveDatasets({ standard: [], contracts: [{ address: '0x' + 'b'.repeat(40), abiFile: path.join(dir, 'none.json') }] }, { network: 'mainnet' }),
      ).rejects.toThrow(/cannot read the ABI file/);
    } finally {
      await cleanup();
    }
  });
});
