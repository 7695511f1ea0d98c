import { describe, expect, it } from 'vitest';
import { runCliInProcess } from '../helpers/cli.js';
import { withSuggestions } from '../../src/cli/usage-hints.js';

// Usage errors name the nearest known flag or choice (issue 37, "Text that is true": unknown flags and datasets
// get a "did you mean"), and an unknown flag is named once, as typed.
describe('usage errors suggest the nearest name', () => {
  it('names a mistyped flag once, as typed, with the flag it was meant to be', async () => {
    const r = await runCliInProcess(['run', 'jobs/demo.json', '--finality-dept', '3']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('unknown flag --finality-dept (did you mean --finality-depth?)');
    expect(r.stderr).not.toContain('finalityDept');
  });

  it('tells a stray positional from a flag', async () => {
    const r = await runCliInProcess(['run', 'jobs/demo.json', 'jobs/other.json', '--concurrenc', '2']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('unexpected argument "jobs/other.json"');
    expect(r.stderr).toContain('unknown flag --concurrenc (did you mean --concurrency?)');
  });

  it('suggests the dataset a mistyped one was meant to be', async () => {
    const r = await runCliInProcess(['export', 'transaction', '--lake', 'unused']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('Given: "transaction" (did you mean "transactions"?), Choices:');
  });

  it('suggests nothing when nothing is near', async () => {
    const r = await runCliInProcess(['status', '--format', 'xml']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('Given: "xml", Choices:');
    expect(r.stderr).not.toContain('did you mean');
    const plain = withSuggestions('Unknown argument: zzzzzz', ['lake', 'catalog'], ['--zzzzzz']);
    expect(plain).toBe('unknown flag --zzzzzz');
  });
});
