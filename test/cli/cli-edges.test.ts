import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { version as duckdbVersion } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeEndpoints } from '../../src/cli/commands/describe.js';
import { versionText } from '../../src/cli/version.js';
import { startSimulator } from '../../src/simulator/index.js';
import { runCliCapturing, runCliInProcess, type CliResult } from '../helpers/cli.js';
import { queryCatalog, tempDir } from '../helpers/lake.js';

let dir: string;
let cleanup: () => Promise<void>;
beforeAll(async () => ({ dir, cleanup } = await tempDir()));
afterAll(async () => cleanup?.());

/**
 * A command in this process, as the bin runs it (test/helpers/cli.ts runCliCapturing: what it prints, every byte it
 * writes, the exit code it decides), with `env` over this process's environment for the call (no API key or URL
 * unless given, as a child of runCli would have): what these commands print and their exit codes are the point.
 */
const runCli = (args: string[], opts: { env?: NodeJS.ProcessEnv } = {}): Promise<CliResult> =>
  runCliCapturing(args, { CHAINLAKE_API_KEY: '', CHAINLAKE_MAINNET_URL: '', ...opts.env });

const pkgVersion = (JSON.parse(readFileSync('package.json', 'utf8')) as { version: string }).version;

describe('the CLI’s rough edges (issue 37)', () => {
  it('--version names the DuckDB library and, from a checkout, the commit', async () => {
    const v = await runCliInProcess(['--version']);
    expect(v.code).toBe(0);
    const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
    expect(v.stdout).toBe(`${pkgVersion} (duckdb ${duckdbVersion()}, commit ${commit})\n`);
    expect(duckdbVersion()).toMatch(/^v\d+\.\d+\.\d+/);
  });

  it('--version of a package folder that is not a checkout has no commit', async () => {
    // As an install in node_modules: a package.json and no .git.
    await writeFile(path.join(dir, 'package.json'), JSON.stringify({ name: 'chainlake', version: '9.8.7' }));
    expect(await versionText(dir)).toBe(`9.8.7 (duckdb ${duckdbVersion()})`);
  });

  it('a hint names the lake’s real variable, CHAINLAKE_LAKE, never $LAKE', async () => {
    const empty = await runCliInProcess(['query', '--lake', '', 'SELECT 1']);
    expect(empty.code).toBe(2);
    expect(empty.stderr).toContain(
      "hint: name the lake folder, e.g. --lake data/lake, or leave --lake out (the job's lake, else $CHAINLAKE_LAKE, else data/lake)",
    );
    const none = await runCliInProcess(['query', '--lake', path.join(dir, 'no-lake-here'), 'SELECT 1']);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('hint: check --lake (or $CHAINLAKE_LAKE): it names the folder a run wrote');
    expect(empty.stderr + none.stderr).not.toMatch(/\$LAKE\b/);
  });

  it('every help example names job files that exist, and no text of the CLI names $LAKE', async () => {
    const { COMMANDS } = await import('../../src/cli/command-registry.js');
    const named: string[] = [];
    for (const cmd of Object.keys(COMMANDS)) {
      const h = await runCliInProcess([cmd, '--help']);
      expect(h.code, cmd).toBe(0);
      const examples = h.stdout.slice(h.stdout.indexOf('Examples:'));
      for (const file of examples.match(/\bjobs\/[\w.-]+\.json\b/g) ?? []) named.push(`${cmd}: ${file}`);
      expect(h.stdout, cmd).not.toMatch(/\$LAKE\b/);
    }
    expect(named.length).toBeGreaterThan(5);
    expect(named.filter((n) => !existsSync(n.slice(n.indexOf(': ') + 2)))).toEqual([]);
  });

  it('`chainlake completion` prints a shell completion script that asks chainlake for the words', async () => {
    const r = await runCliInProcess(['completion']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('complete -o bashdefault -o default -F _chainlake_yargs_completions chainlake');
    expect(r.stdout).toContain('chainlake --get-yargs-completions');
    // What the script asks: a command's own flags.
    const words = await runCliInProcess(['--get-yargs-completions', 'chainlake', 'query', '--fo']);
    expect(words.stdout.split('\n')).toEqual(expect.arrayContaining(['--format', '--output', '--lake']));
  });

  it('verify-contract: a bad address exits 2; a refusal prints the API’s reason; --format json is one object', async () => {
    const src = path.join(dir, 'Vault.sol');
    await writeFile(src, 'pragma solidity ^0.8.24;\ncontract Vault { uint256 public total; }\n');
    const bad = await runCliInProcess(['verify-contract', '0x12', '--source', src, '--name', 'Vault', '--compiler', 'v0.8.24']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('chainlake: verify-contract <address>: not an address (0x + 40 hex digits): "0x12"');
    const sim = await startSimulator({ seed: 5 });
    try {
      const env = { CHAINLAKE_MAINNET_URL: sim.urls.mainnet, CHAINLAKE_API_KEY: sim.apiKey };
      const contract = sim.examples.unverifiedContract;
      const args = ['verify-contract', contract, '--source', src, '--compiler', 'v0.8.24'];
      const refused = await runCli([...args, '--name', 'Other'], { env });
      expect(refused.code).toBe(1);
      expect(refused.stdout).toBe(
        `not verified: the API did not accept the source of ${contract.toLowerCase()} as Other: Fail - Unable to verify: the source does not declare contract Other\n`,
      );
      const refusedJson = await runCli([...args, '--name', 'Other', '--format', 'json'], { env });
      expect(refusedJson.code).toBe(1);
      expect(JSON.parse(refusedJson.stdout)).toEqual({
        address: contract.toLowerCase(),
        name: 'Other',
        network: 'mainnet',
        verified: false,
        message: 'Fail - Unable to verify: the source does not declare contract Other',
      });
      const ok = await runCli([...args, '--name', 'Vault', '--format', 'json'], { env });
      expect(ok.code, ok.stderr).toBe(0);
      expect(ok.stdout.trim().split('\n')).toHaveLength(1);
      expect(JSON.parse(ok.stdout)).toEqual({ address: contract.toLowerCase(), name: 'Vault', network: 'mainnet', verified: true, message: 'OK' });
    } finally {
      await sim.close();
    }
  });

  it('verify-contract names the flag at fault and the endpoint by its `describe --endpoints` id, never "#16"', async () => {
    const contract = '0x1234567890abcdef1234567890abcdef12345678';
    const empty = path.join(dir, 'Empty.sol');
    await writeFile(empty, '');
    const noSource = await runCliInProcess(['verify-contract', contract, '--source', empty, '--name', 'Vault', '--compiler', 'v0.8.24', '--simulator']);
    expect(noSource.code).toBe(2);
    expect(noSource.stderr).toContain(`chainlake: --source ${empty} is empty: there is no source to verify`);
    const src = path.join(dir, 'Vault16.sol');
    await writeFile(src, 'contract Vault {}\n');
    const runs = await runCliInProcess([
      'verify-contract',
      contract,
      '--source',
      src,
      '--name',
      'Vault',
      '--compiler',
      'v0.8.24',
      '--runs',
      '-3',
      '--simulator',
    ]);
    expect(runs.code).toBe(2);
    expect(runs.stderr).toContain("chainlake: --runs -3: the optimizer's runs must be a whole number, 0 or more");
    expect(describeEndpoints()).toContainEqual({
      id: 'contract_verify',
      dataset: '(verify-contract)',
      api: 'explorer',
      method: 'POST',
      path: '/v1/contracts/{address}/verify',
    });
    const sim = await startSimulator({ seed: 5 });
    try {
      const refused = await runCli(['verify-contract', contract, '--source', src, '--name', 'Vault', '--compiler', 'v0.8.24'], {
        env: { CHAINLAKE_MAINNET_URL: sim.urls.mainnet, CHAINLAKE_API_KEY: 'not-the-key' },
      });
      expect(refused.code).toBe(2);
      expect(refused.stderr).toMatch(/^chainlake: contract_verify: HTTP 40[13]/m);
      for (const r of [noSource, runs, refused]) expect(r.stderr).not.toContain('#16');
    } finally {
      await sim.close();
    }
  });

  it('maintain --format json prints one object of what it did, and on which lake', async () => {
    const sim = await startSimulator({ seed: 6 });
    const lake = path.join(dir, 'maintained');
    try {
      const env = { CHAINLAKE_MAINNET_URL: sim.urls.mainnet, CHAINLAKE_API_KEY: sim.apiKey };
      const address = sim.examples.addresses[0]!;
      const e = await runCli(['export', 'transactions', '--address', address, '--lake', lake, '-q'], { env });
      expect(e.code, e.stderr).toBe(0);
    } finally {
      await sim.close();
    }
    const before = Number((await queryCatalog(lake, 'SELECT count(*) AS n FROM ducklake_snapshot'))[0]!.n);
    expect(before).toBeGreaterThan(1);
    const r = await runCli(['maintain', '--lake', lake, '--keep-snapshots', '1', '--format', 'json']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim().split('\n')).toHaveLength(1);
    expect(JSON.parse(r.stdout)).toEqual({
      kind: 'local',
      lake,
      from: 'flag',
      expiredSnapshots: before - 1,
      deletedFiles: expect.any(Number),
      orphansRemoved: 0,
      orphansKept: 0,
    });
  });

  it('query --output: the extension chooses the format unless --format says; an existing file needs --force', async () => {
    const sim = await startSimulator({ seed: 7 });
    const lake = path.join(dir, 'queried');
    try {
      const env = { CHAINLAKE_MAINNET_URL: sim.urls.mainnet, CHAINLAKE_API_KEY: sim.apiKey };
      const e = await runCli(['export', 'transactions', '--address', sim.examples.addresses[0]!, '--lake', lake, '-q'], { env });
      expect(e.code, e.stderr).toBe(0);
    } finally {
      await sim.close();
    }
    const sql = 'SELECT 42 AS n';
    const out = (name: string) => path.join(dir, name);
    const query = (...args: string[]) => runCliInProcess(['query', '--lake', lake, ...args, sql]);
    for (const [name, check] of [
      ['r.csv', (b: Buffer) => expect(b.toString()).toBe('n\n42\n')],
      ['r.json', (b: Buffer) => expect(b.toString()).toBe('{"n":42}\n')],
      ['r.JSONL', (b: Buffer) => expect(b.toString()).toBe('{"n":42}\n')],
      ['r.ndjson', (b: Buffer) => expect(b.toString()).toBe('{"n":42}\n')],
      ['r.parquet', (b: Buffer) => expect(b.subarray(0, 4).toString()).toBe('PAR1')],
      // An Arrow IPC stream begins with a continuation marker.
      ['r.arrows', (b: Buffer) => expect(b.readUInt32LE(0)).toBe(0xffffffff)],
      ['r.arrow', (b: Buffer) => expect(b.readUInt32LE(0)).toBe(0xffffffff)],
      ['r.ipc', (b: Buffer) => expect(b.readUInt32LE(0)).toBe(0xffffffff)],
    ] as const) {
      const r = await query('--output', out(name));
      expect(r.code, `${name}: ${r.stderr}`).toBe(0);
      check(await readFile(out(name)));
    }
    // --format wins over the extension.
    const csvInJson = await query('--format', 'csv', '--output', out('csv.json'));
    expect(csvInJson.code, csvInJson.stderr).toBe(0);
    expect(await readFile(out('csv.json'), 'utf8')).toBe('n\n42\n');

    // An existing file is kept without --force, replaced with it.
    await writeFile(out('keep.csv'), 'precious\n');
    const refused = await query('--output', out('keep.csv'));
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(`chainlake: --output ${out('keep.csv')} exists: not overwritten`);
    expect(refused.stderr).toContain('hint: give --force to overwrite it');
    expect(await readFile(out('keep.csv'), 'utf8')).toBe('precious\n');
    const forced = await query('--output', out('keep.csv'), '--force');
    expect(forced.code, forced.stderr).toBe(0);
    expect(await readFile(out('keep.csv'), 'utf8')).toBe('n\n42\n');
  });
});
