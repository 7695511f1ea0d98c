// An export that decodes in the run, killed in each phase of the commit protocol: the decoded rows commit in
// the journal of the logs they come from, so the next run leaves the lake of an uninterrupted run, decoded
// datasets and their rejects included (never logs without their decoded rows).
import path from 'node:path';
import { parseAbiItem, toEventSelector, type AbiEvent } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STANDARD } from '../../src/decode/datasets.js';
import { decodedShape } from '../../src/decode/lake.js';
import type { CommitStep } from '../../src/load/test-hooks.js';
import { loadJobFile } from '../../src/pipeline/job.js';
import { runJob } from '../../src/pipeline/run.js';
import { A_ERC20_0 } from '../../src/simulator/chain.js';
import { chainFor, startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { A_ODD_ERC20, STANDARD_SIGNATURES } from '../../src/simulator/token-events.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';
import { assertClean, catalogFiles, lakeContent, runWriter, withDuck, writeJob } from '../load/helpers.js';

const SEED = 3;
const chain = chainFor(SEED, 'small', 'mainnet');
const TRANSFER = toEventSelector(parseAbiItem(STANDARD_SIGNATURES.erc20Transfer) as AbiEvent);

let sim: RunningSimulator;
let dir: string;
let cleanup: () => Promise<void>;
let reference: Record<string, string>;

/** Transfer logs of two tokens (one with malformed logs: decoding rejects), committed in several batches, decoded in the run. */
const job = (lake: string): Promise<string> =>
  writeJob(path.join(dir, `${path.basename(lake)}.json`), sim, lake, [], {
    range: { fromBlock: 0, toBlock: 3000 },
    commit: { everyRows: 400 },
    datasets: { event_logs: { contracts: [A_ERC20_0, A_ODD_ERC20].map((i) => ({ address: chain.addrLower(i), topics: [TRANSFER] })) } },
    decode: { standard: ['erc20'] },
  });

/**
 * `chainlake run <job>` in this process: its report's status. Only the killed writer is a child process (the kill
 * is the point); the reference run and the run that recovers run here, through the same code (runJob recovers the
 * lake first, as `chainlake run` does).
 */
const runInProcess = async (file: string): Promise<string> => (await runJob(await loadJobFile(file, { CHAINLAKE_API_KEY: sim.apiKey }))).status;

/** The decoded Transfer rows (straight from the files, without the run columns) and the decoding's rejects. */
async function decodedContent(lake: string): Promise<Record<string, string>> {
  const shape = decodedShape(STANDARD.erc20_transfer_events!);
  const current = await catalogFiles(lake);
  const files = current.filter((f) => f.path.startsWith(`main/${shape.name}/`)).map((f) => path.join(lake, f.path));
  const rejectFiles = current.filter((f) => f.path.startsWith('main/_rejects/')).map((f) => path.join(lake, f.path));
  const json = (rows: unknown): string => JSON.stringify(rows, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
  return withDuck(async (q) => ({
    [shape.name]: files.length
      ? json(await q(`SELECT * EXCLUDE (_run_id, _ingested_at) FROM read_parquet(${json(files).replace(/"/g, "'")}) ORDER BY transaction_hash, log_index`))
      : '[]',
    rejects: json(
      await q(
        `SELECT DISTINCT reason, entry::VARCHAR AS entry FROM read_parquet(${json(rejectFiles).replace(/"/g, "'")}) WHERE "window" LIKE 'decode/%' ORDER BY ALL`,
      ).catch(() => []),
    ),
  }));
}

beforeAll(async () => {
  sim = await startSimulator({ seed: SEED });
  ({ dir, cleanup } = await tempDir('chainlake-decode-crash-'));
  const ref = path.join(dir, 'reference');
  expect(await runInProcess(await job(ref))).toBe('complete');
  reference = { ...(await decodedContent(ref)), logs: JSON.stringify(await lakeContent(ref)) };
  expect(reference.erc20_transfer_events!.length).toBeGreaterThan(1000);
  expect(reference.rejects).not.toBe('[]');
  // Several batches: the killed commit is the first, the next run has more to commit after recovering it.
  const [commits] = await queryCatalog(ref, 'SELECT count(*)::INTEGER AS n FROM commits');
  expect(commits!.n).toBeGreaterThan(1);
  expect(await assertClean(ref, await catalogFiles(ref))).toEqual([]);
}, 120_000);

afterAll(async () => {
  await sim?.close();
  await cleanup?.();
});

// One kill point per phase of a commit holding decoded rows, each a different recovery path, as in
// test/load/crash: before the decision ('final': the decoded files written, the commit abandoned and fetched
// again), decided and half applied ('rename': the journal replayed over files moved and not; 'journal' and
// 'catalog' are its ends), and applied with the journal left ('committed': nothing applied twice). A kill before
// 'final' ('stage-write', 'typed') stops the run before any decoding.
const DECODED_STEPS: readonly CommitStep[] = ['final', 'rename', 'committed'];

describe('an export decoding in the run, killed in each phase of the commit protocol', () => {
  for (const step of DECODED_STEPS) {
    it(`killed at '${step}': the next run yields the uninterrupted lake, decoded rows included`, async () => {
      const lake = path.join(dir, `crash-${step}`);
      const file = await job(lake);
      const killed = await runWriter(['run', file, '-q'], { apiKey: sim.apiKey, crash: step });
      expect(killed.signal).toBe('SIGKILL');
      expect(await runInProcess(file)).toBe('complete');
      expect({ ...(await decodedContent(lake)), logs: JSON.stringify(await lakeContent(lake)) }).toEqual(reference);
      expect(await assertClean(lake, await catalogFiles(lake))).toEqual([]);
      const [n] = await queryCatalog(lake, 'SELECT count(*)::BIGINT AS n FROM erc20_transfer_events');
      expect(Number(n!.n)).toBe(JSON.parse(reference.erc20_transfer_events!).length);
    });
  }
});
