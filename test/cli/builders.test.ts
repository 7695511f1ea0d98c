import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

// A yargs builder cast to `never` (or through `unknown`) turns off the check that the options it declares
// match the handler's argument type; without the cast `tsc` compares them (npm run build fails on a drift).
describe('yargs builders are type-checked', () => {
  it('no command builder is cast away from its argument type', () => {
    const dir = path.resolve('src/cli/commands');
    const files = readdirSync(dir).filter((f) => f.endsWith('.ts'));
    expect(files.length).toBeGreaterThan(10);
    const casts = files.flatMap((f) =>
      readFileSync(path.join(dir, f), 'utf8')
        .split('\n')
        .map((line, i) => ({ at: `${f}:${i + 1}`, line }))
        .filter(({ line }) => /\bas never\b|as unknown as Argv/.test(line)),
    );
    expect(casts).toEqual([]);
  });
});
