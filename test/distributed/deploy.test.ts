// The deployment recipes run chainlake commands that exist with flags that exist: each command line of
// deploy/kubernetes/distributed.yaml and deploy/systemd/chainlake-worker@.service is parsed by the real CLI
// (strict: an unknown flag fails) up to the catalog check, which a deliberately wrong URL stops (exit 2).
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';

async function commandLines(): Promise<string[][]> {
  const k8s = await readFile('deploy/kubernetes/distributed.yaml', 'utf8');
  const lines = [...k8s.matchAll(/^\s*args: (\[.*\])$/gm)].map((m) => JSON.parse(m[1]!) as string[]);
  const unit = await readFile('deploy/systemd/chainlake-worker@.service', 'utf8');
  const exec = /^ExecStart=\S+ dist\/cli\/main\.js (.*)$/m.exec(unit)![1]!;
  lines.push(exec.replace(/%[A-Za-z]/g, 'x').split(/\s+/));
  return lines;
}

describe('deployment recipes', () => {
  it('every command line they run parses, up to the (wrong) catalog URL', async () => {
    const lines = await commandLines();
    expect(lines.map((l) => l[0])).toEqual(['worker', 'enqueue', 'maintain', 'worker']);
    for (const args of lines) {
      const r = await runCli(args, { env: { CHAINLAKE_CATALOG: 'mysql://nowhere/lake', CHAINLAKE_STORE: '/nonexistent/store' } });
      expect({ args, code: r.code }).toEqual({ args, code: 2 });
      expect(r.stderr).toMatch(/--catalog mysql:\/\/nowhere\/lake is not a PostgreSQL URL/);
    }
  }, 60_000);
});
