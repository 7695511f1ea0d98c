// setupFiles: each test fork notes the file it runs (see fork-watch.ts).
import { expect } from 'vitest';
import { noteFork } from './helpers/fork-watch.js';

noteFork(expect.getState().testPath ?? 'unknown file');
