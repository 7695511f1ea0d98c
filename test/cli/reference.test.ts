import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { datasetsReference, jobReference } from '../../src/cli/reference.js';
import { runOverrides } from '../../src/cli/common.js';
import { COMMIT_OPTIONS, RANGE_OPTIONS, RETRY_OPTIONS, TIMEOUT_OPTIONS, TOP_OPTIONS, type JobOption } from '../../src/pipeline/job-options.js';
import { jobSchema } from '../../src/pipeline/job-schema.js';
import { parseJob } from '../../src/pipeline/job.js';

// Issue 35, "configuration resolved once": the job options are declared once (src/pipeline/job-options.ts) and the
// schema, the parser's bounds and defaults, the flags' bounds and the reference pages in docs/ are derived from it.

const ADDRESS = '0x' + '1'.repeat(40);
const base = (): Record<string, unknown> => ({ target: 'simulator', datasets: { transactions: { addresses: [ADDRESS] } } });

describe('the generated references in docs/', () => {
  it('docs/job-reference.md and docs/datasets.md are what the declarations give (run `npm run docs:reference`)', async () => {
    expect(await readFile('docs/job-reference.md', 'utf8'), 'docs/job-reference.md is stale: npm run docs:reference').toBe(jobReference());
    expect(await readFile('docs/datasets.md', 'utf8'), 'docs/datasets.md is stale: npm run docs:reference').toBe(datasetsReference());
  });

  it('every dataset and every one of its columns is in docs/datasets.md', async () => {
    const text = await readFile('docs/datasets.md', 'utf8');
    const { datasetNames, getDataset } = await import('../../src/datasets/registry.js');
    for (const n of datasetNames()) {
      expect(text).toContain(`## \`${n}\``);
      for (const c of getDataset(n).columns) expect(text, `${n}.${c.name}`).toContain(`| \`${c.name}\` |`);
    }
  });
});

type Schema = { description?: string; default?: unknown; properties?: Record<string, Schema> };

describe("the job file's JSON Schema", () => {
  it('every key has a description, and every optional key a default (a value or in words)', () => {
    const missing: string[] = [];
    const walk = (props: Record<string, Schema>, at: string, datasetsLevel: boolean): void => {
      for (const [k, s] of Object.entries(props)) {
        const name = `${at}${k}`;
        if (!s.description) missing.push(`${name}: no description`);
        const leaf = !s.properties;
        // Scope keys are what a dataset is asked for: they have no default by nature.
        if (leaf && !datasetsLevel && s.default === undefined && !/Default: /.test(s.description ?? '') && !['$schema', 'description'].includes(k))
          missing.push(`${name}: no default`);
        if (s.properties && name !== 'datasets' && name !== 'decode' && name !== 'paths') walk(s.properties, `${name}.`, false);
      }
    };
    walk((jobSchema() as Schema).properties!, '', false);
    expect(missing).toEqual([]);
  });
});

describe('bounds and defaults come from the one declaration', () => {
  const groups: [string, Record<string, JobOption>][] = [
    ['', TOP_OPTIONS],
    ['range', RANGE_OPTIONS],
    ['commit', COMMIT_OPTIONS],
    ['retry', RETRY_OPTIONS],
    ['timeouts', TIMEOUT_OPTIONS],
  ];
  const withOption = (group: string, key: string, v: unknown): Record<string, unknown> =>
    group === '' ? { ...base(), [key]: v } : { ...base(), [group]: { [key]: v } };

  it('the parser accepts each int option at its bounds and refuses one past them, naming the key', () => {
    for (const [group, opts] of groups) {
      for (const [key, o] of Object.entries(opts)) {
        if (o.kind !== 'int') continue;
        const where = group === '' ? key : `${group}.${key}`;
        expect(() => parseJob(withOption(group, key, o.min), 'job.json', process.env), where).not.toThrow();
        if (o.min > 0) expect(() => parseJob(withOption(group, key, o.min - 1), 'job.json', process.env), where).toThrow(where);
        if (o.max !== undefined) {
          expect(() => parseJob(withOption(group, key, o.max), 'job.json', process.env), where).not.toThrow();
          expect(() => parseJob(withOption(group, key, o.max! + 1), 'job.json', process.env), where).toThrow(where);
        }
      }
    }
  });

  it('a job without the keys gets the declared defaults', () => {
    const job = parseJob(base(), 'job.json', process.env);
    expect(job.source.concurrency).toBe(TOP_OPTIONS.concurrency.default);
    expect(job.source.pageSize).toBe(TOP_OPTIONS.pageSize.default);
    expect(job.source.resultWindow).toBe(TOP_OPTIONS.resultWindow.default);
    expect(job.lake.strict).toBe(TOP_OPTIONS.strict.default);
    expect(job.what.range.safetyMarginBlocks).toBe(RANGE_OPTIONS.safetyMarginBlocks.default);
    expect(job.lake.commit).toEqual({ everyRows: COMMIT_OPTIONS.everyRows.default, everySeconds: COMMIT_OPTIONS.everySeconds.default });
  });

  it("a flag has its key's bounds", () => {
    const max = TOP_OPTIONS.concurrency.max!;
    expect(parseJob(base(), 'job.json', {}, runOverrides({ concurrency: max }, undefined)).source.concurrency).toBe(max);
    expect(() => runOverrides({ concurrency: max + 1 }, undefined)).toThrow(`--concurrency must be an integer from 1 to ${max}`);
    expect(() => runOverrides({ rps: TOP_OPTIONS.rps.max! + 1 }, undefined)).toThrow(`--rps must be an integer from 1 to ${TOP_OPTIONS.rps.max!}`);
  });
});
