import { describe, expect, it } from 'vitest';
import yargs from 'yargs';
import { parseFaultKinds, parseLatency, simulateCommand } from '../../src/cli/commands/simulate.js';
import { get } from './helpers.js';

/** Runs `chainlake simulate ...` in-process; stops it with a (synthetic) SIGTERM once the JSON line is out. */
async function runSimulate(args: string[], onLine: (line: any) => Promise<void>): Promise<string> {
  const saved = process.listeners('SIGTERM');
  for (const l of saved) process.off('SIGTERM', l);
  const write = process.stdout.write.bind(process.stdout);
  let out = '';
  let resolveLine!: (s: string) => void;
  const lineSeen = new Promise<string>((r) => {
    resolveLine = r;
  });
  process.stdout.write = ((chunk: string | Uint8Array) => {
    out += String(chunk);
    if (out.includes('\n')) resolveLine(out);
    return true;
  }) as typeof process.stdout.write;
  try {
    const run = yargs(args)
      .scriptName('chainlake')
      .command(simulateCommand)
      .strict()
      .exitProcess(false)
      .fail((msg, err) => {
        throw err ?? new Error(msg);
      })
      .parseAsync();
    const line = await Promise.race([lineSeen, run.then(() => out)]);
    await onLine(JSON.parse(line.split('\n')[0]!));
    process.emit('SIGTERM');
    await run;
    return out;
  } finally {
    process.stdout.write = write;
    for (const l of saved) process.on('SIGTERM', l);
  }
}

describe('chainlake simulate', () => {
  it('prints one JSON line with URLs, key and examples, serves, and stops on SIGTERM', async () => {
    const out = await runSimulate(['simulate', '--port', '0', '--seed', '3', '--latency-ms', '1-3', '--result-window', '5000'], async (info) => {
      expect(Object.keys(info)).toEqual(['mainnet', 'testnet', 'testnetAlt', 'finance', 'apiKey', 'examples']);
      expect(info.mainnet).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mainnet$/);
      expect(info.examples.whale).toMatch(/^0x[0-9a-f]{40}$/);
      const r = await get(`${info.mainnet}/v1/accounts/${info.examples.whale}/transactions?limit=1000&offset=4500`, { 'api-key': info.apiKey });
      expect(r.status).toBe(400);
      expect(r.json.message).toMatch(/5000/);
      const ok = await get(`${info.finance}/dashboard/overview`);
      expect(ok.status).toBe(200);
    });
    expect(out.trim().split('\n')).toHaveLength(1);
    expect(process.exitCode ?? 0).toBe(0);
  });

  it('faults and rate limits from flags', async () => {
    await runSimulate(['simulate', '--fault-rate', '1', '--faults', '503', '--rate-limit', '100'], async (info) => {
      const r = await get(`${info.mainnet}/v1/blocks/latest`, { 'api-key': info.apiKey });
      expect(r.status).toBe(503);
    });
  });

  it('parses and rejects flag values clearly', () => {
    expect(parseLatency('25')).toBe(25);
    expect(parseLatency('5-80')).toEqual({ min: 5, max: 80 });
    expect(() => parseLatency('80-5')).toThrow(/MIN/);
    expect(() => parseLatency('fast')).toThrow(/latency/);
    expect(parseFaultKinds('429, reset')).toEqual(['429', 'reset']);
    expect(() => parseFaultKinds('429,boom')).toThrow(/boom/);
  });

  it('rejects invalid flags before starting', async () => {
    for (const args of [
      ['simulate', '--fault-rate', '2'],
      ['simulate', '--scale', 'huge'],
      ['simulate', '--port', '-1'],
      ['simulate', '--faults', 'nope'],
    ]) {
      await expect(
        (async () =>
          yargs(args)
            .command(simulateCommand)
            .strict()
            .exitProcess(false)
            .fail((msg, err) => {
              throw err ?? new Error(msg);
            })
            .parseAsync())(),
      ).rejects.toThrow();
    }
  });
});
