import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The folder of chainlake's package.json (a git checkout, or node_modules/chainlake of an install). */
export const PACKAGE_DIR = fileURLToPath(new URL('../../', import.meta.url));

/** The package's own version, from its package.json. */
export function packageVersion(packageDir: string = PACKAGE_DIR): string {
  return (JSON.parse(readFileSync(path.join(packageDir, 'package.json'), 'utf8')) as { version: string }).version;
}

/**
 * The commit of a package folder that is a git checkout (`.git` is a folder, or a file in a worktree), else
 * undefined: an installed package is not one, and git is not asked there (nor need it be installed).
 */
export function checkoutCommit(packageDir: string): string | undefined {
  if (!existsSync(path.join(packageDir, '.git'))) return undefined;
  try {
    const out = execFileSync('git', ['rev-parse', '--short', 'HEAD'], {
      cwd: packageDir,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: 5_000,
    }).trim();
    return /^[0-9a-f]+$/.test(out) ? out : undefined;
  } catch {
    // No git on the PATH, or a checkout git does not read: the version says less, nothing fails.
    return undefined;
  }
}

/**
 * What `chainlake --version` prints: the package's version, the DuckDB library it writes the lake with (a bug
 * report needs both) and, from a checkout, its commit: `0.1.0 (duckdb v1.5.5, commit abc1234)`.
 * Loads DuckDB's binding, so only --version calls it.
 */
export async function versionText(packageDir: string = PACKAGE_DIR): Promise<string> {
  const { version: duckdbVersion } = await import('../ducklake/node-api.js');
  const commit = checkoutCommit(packageDir);
  return `${packageVersion(packageDir)} (duckdb ${duckdbVersion()}${commit ? `, commit ${commit}` : ''})`;
}
