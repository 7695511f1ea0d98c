import { fileURLToPath } from 'node:url';
import path from 'node:path';

/** The repository root, whether this runs from bench/ sources or from dist/bench-build/bench/. */
function findRoot(): string {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const parts = here.split(path.sep);
  const i = parts.lastIndexOf('dist');
  return i >= 0 ? parts.slice(0, i).join(path.sep) : path.resolve(here, '..', '..');
}

export const ROOT = findRoot();
/** The compiled CLI (`npm run build`): what a user runs. */
export const CLI = path.join(ROOT, 'dist', 'cli', 'main.js');
export const RESULTS_DIR = path.join(ROOT, 'bench', 'results');
