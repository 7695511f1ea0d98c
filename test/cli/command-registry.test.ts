import { describe, expect, it } from 'vitest';
import { COMMANDS, commandOf } from '../../src/cli/command-registry.js';

describe('the command registry (each command loaded only when it runs)', () => {
  it('names each command as its module does, so a command line loads the module that handles it', async () => {
    for (const [name, load] of Object.entries(COMMANDS)) expect(String((await load()).command).split(' ')[0]).toBe(name);
  });

  it('finds the command after the global options, and none for a mistyped or missing one', () => {
    expect(commandOf(['run', 'jobs/demo.json'])).toBe('run');
    expect(commandOf(['--log-format', 'json', '-q', 'query', 'SELECT 1'])).toBe('query');
    expect(commandOf(['--verbose', 'verify-contract', '0xabc'])).toBe('verify-contract');
    expect(commandOf(['rnu', 'jobs/demo.json'])).toBeUndefined();
    expect(commandOf(['--help'])).toBeUndefined();
    expect(commandOf(['constructor'])).toBeUndefined();
  });
});
