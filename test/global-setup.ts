import { watchForks } from './helpers/fork-watch.js';

/** Both tiers: a fork that ends unasked is reported by vitest without its file, code or signal (see fork-watch.ts). */
export default function setup(): () => void {
  return watchForks();
}
