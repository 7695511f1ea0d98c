// Decoding in the job (the `decode` key) and afterwards (`chainlake decode`), through the CLI's commands in this
// process (what they print, log and exit with; a process each would only add Node's and DuckDB's start).
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { parseAbiItem, toEventSelector, type AbiEvent } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { A_ERC20_0 } from '../../src/simulator/chain.js';
import { chainFor } from '../../src/simulator/index.js';
import { A_SHOWCASE, showcaseEvents, STANDARD_SIGNATURES } from '../../src/simulator/token-events.js';
import { runCliCapturing } from '../helpers/cli.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';

const SHOWCASE_EVENTS = showcaseEvents();
let dir: string;
let cleanup: () => Promise<void>;
const chain = chainFor(2, 'small', 'mainnet');
const TOKEN = chain.addrLower(A_ERC20_0 + 1);
const SHOW = chain.addrLower(A_SHOWCASE);
const TRANSFER = toEventSelector(parseAbiItem(STANDARD_SIGNATURES.erc20Transfer) as AbiEvent);
const NOTED = SHOWCASE_EVENTS.find((e) => e.name === 'Noted')!;

beforeAll(async () => {
  ({ dir, cleanup } = await tempDir());
});
afterAll(async () => {
  await cleanup?.();
});

describe('decoding in a job and afterwards', () => {
  it('a job with "decode" writes decoded datasets in the same run; chainlake decode adds another contract later; describe documents them', async () => {
    const lake = path.join(dir, 'lake');
    const job = path.join(dir, 'job.json');
    await writeFile(
      job,
      JSON.stringify({
        name: 'decode-cli',
        target: 'simulator',
        simulator: { seed: 2 },
        lake,
        range: { fromBlock: 0, toBlock: 6000 },
        datasets: {
          event_logs: {
            contracts: [
              { address: TOKEN, topics: [TRANSFER] },
              { address: SHOW, topics: [toEventSelector(NOTED)] },
            ],
          },
        },
        decode: { standard: ['erc20'], tokens: [TOKEN] },
      }),
    );
    const run = await runCliCapturing(['run', job, '--log-format', 'json']);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr + run.stdout).toMatch(/decode\.done/);
    const logs = await queryCatalog(lake, `SELECT count(*)::INTEGER AS n FROM event_logs WHERE address = '${TOKEN}'`);
    const rows = await queryCatalog(lake, `SELECT count(*)::INTEGER AS n, count(DISTINCT _run_id)::INTEGER AS runs FROM erc20_transfer_events`);
    expect(rows[0]!.n).toBe(logs[0]!.n);
    expect(rows[0]!.n).toBeGreaterThan(100);
    // The holders query of the README: balances from the decoded transfers.
    const holders = await queryCatalog(
      lake,
      `SELECT holder, sum(delta) AS balance FROM (
         SELECT receiver AS holder, value AS delta FROM erc20_transfer_events WHERE token_address = '${TOKEN}'
         UNION ALL SELECT sender, -value FROM erc20_transfer_events WHERE token_address = '${TOKEN}'
       ) WHERE holder <> '0x0000000000000000000000000000000000000000' GROUP BY holder HAVING sum(delta) > 0 ORDER BY balance DESC`,
    );
    expect(holders.length).toBeGreaterThan(1);

    // History exported before an ABI was known: decoded afterwards from a signature.
    const sig = 'Noted(address indexed author, bytes payload, string note)';
    const desc = await runCliCapturing(['decode', '--lake', lake, '--contract', SHOW, '--name', 'show', '--signature', sig, '--describe']);
    expect(desc.code, desc.stderr).toBe(0);
    expect(desc.stdout).toMatch(/^show_noted \(decoded events: Noted\(address indexed author, bytes payload, string note\)\)/);
    expect(desc.stdout).toMatch(/payload\s+VARCHAR\s+payload \(bytes\), 0x hex, lower-case\./);
    const dec = await runCliCapturing(['decode', '--lake', lake, '--contract', SHOW, '--name', 'show', '--signature', sig, '--format', 'json']);
    expect(dec.code, dec.stderr).toBe(0);
    const r = JSON.parse(dec.stdout);
    expect(r.datasets).toEqual([{ name: 'show_noted', rows: expect.any(Number), partitions: expect.any(Number) }]);
    expect(r.datasets[0].rows).toBeGreaterThan(0);
    const again = JSON.parse(
      (await runCliCapturing(['decode', '--lake', lake, '--contract', SHOW, '--name', 'show', '--signature', sig, '--format', 'json'])).stdout,
    );
    expect(again.datasets).toEqual(r.datasets);
    const noted = await queryCatalog(lake, `SELECT count(*)::INTEGER AS n, count(DISTINCT (transaction_hash, log_index))::INTEGER AS k FROM show_noted`);
    expect(noted[0]).toEqual({ n: r.datasets[0].rows, k: r.datasets[0].rows });
    const days = await queryCatalog(lake, `SELECT count(DISTINCT block_date)::INTEGER AS n FROM erc20_transfer_events`);
    const runs = await queryCatalog(lake, `SELECT count(*)::INTEGER AS n FROM runs WHERE job = '(decode)' AND status = 'complete'`);
    expect(runs[0]!.n).toBe(2);

    // Under ERC-721 alone, the token's Transfer logs (ERC-20-shaped) are skipped and counted, not rejected.
    const other = await runCliCapturing(['decode', '--lake', lake, '--standard', 'erc721', '--tokens', TOKEN]);
    expect(other.code, other.stderr).toBe(0);
    expect(other.stdout).toContain(`\n  ${logs[0]!.n} logs of another standard's shape skipped (erc20 Transfer)\n`);
    expect(other.stdout).toMatch(/_rejects\s+0 logs that fit no asked event/);

    // A decoded table is the lake's own: `compact --dataset` names it (each of its days is one file already).
    const compact = await runCliCapturing(['compact', '--lake', lake, '--dataset', 'erc20_transfer_events', '--format', 'json']);
    expect(compact.code, compact.stderr).toBe(0);
    expect(JSON.parse(compact.stdout)).toMatchObject({ partitions: 0, alreadyCompact: Number(days[0]!.n) });

    const d = await runCliCapturing(['describe', 'erc20_transfer_events']);
    expect(d.code).toBe(0);
    expect(d.stdout).toMatch(/value_raw\s+VARCHAR/);
    const bad = await runCliCapturing(['decode', '--lake', lake, '--contract', SHOW]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/no verified ABI of 0x[0-9a-f]{40} in the lake's contracts dataset/);
  }, 240_000);
});

describe('the datasets a spec names', () => {
  // `decode --describe` with signatures reads no lake: the datasets' names and columns are all it resolves.
  const describeDecoded = (name: string, signature: string) =>
    runCliCapturing(['decode', '--describe', '--contract', '0x' + 'c'.repeat(40), '--name', name, '--signature', signature]);

  it('refuses a name another dataset has, and a parameter named as a fixed column, as spec errors (CHAINLAKE_DECODE_SPEC: exit 2)', async () => {
    // erc20 + Transfers is erc20_transfers, the explorer's dataset.
    const taken = await describeDecoded('erc20', 'Transfers(address to)');
    expect(taken.code).toBe(2);
    expect(taken.stderr).toMatch(/dataset name erc20_transfers \(contract erc20, event Transfers\) is taken; give the contract another name/);
    // Every decoded dataset has a timestamp column of its log's block.
    const clash = await describeDecoded('show', 'Noted(uint256 timestamp)');
    expect(clash.code).toBe(2);
    expect(clash.stderr).toMatch(/event Noted of show: parameter column timestamp clashes with another column of its dataset show_noted/);
    const fine = await describeDecoded('show', 'Noted(uint256 stamp)');
    expect(fine.code, fine.stderr).toBe(0);
  });
});
