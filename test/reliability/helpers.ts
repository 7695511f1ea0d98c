import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { parseJob, type Job } from '../../src/pipeline/job.js';
import type { RunningSimulator } from '../../src/simulator/index.js';

/**
 * `npm run test:soak` sets CHAINLAKE_SOAK=1: more kills, more faults, larger scales. The default is sized
 * for CI (the whole reliability suite in well under four minutes on two cores).
 */
export const SOAK = process.env.CHAINLAKE_SOAK === '1';

/** The demo job's document (every dataset of both APIs, simulator seed 1), as the README ships it. */
export async function demoDoc(): Promise<Record<string, unknown>> {
  return JSON.parse(await readFile(path.resolve('jobs/demo.json'), 'utf8')) as Record<string, unknown>;
}

/** The demo job pointed at a lake (and optionally changed), validated like a job file. */
export async function demoJob(lake: string, change: (doc: Record<string, unknown>) => void = () => {}): Promise<Job> {
  const doc = await demoDoc();
  doc.lake = lake;
  change(doc);
  return parseJob(doc, 'demo-test', process.env);
}

/** Writes a job document to `file` and returns the path. */
export async function writeJobFile(file: string, doc: Record<string, unknown>): Promise<string> {
  await writeFile(file, JSON.stringify(doc, null, 2));
  return file;
}

/** The `simulator` run option for a simulator the test started (so the test controls its faults and head). */
export const simTarget = (sim: RunningSimulator) => ({ urls: sim.urls, apiKey: sim.apiKey });

/** A small seeded PRNG (mulberry32): the suite's random moments are the same on every run of a seed. */
export function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Sum of a stats().faults record. */
export const faultTotal = (faults: Record<string, number>): number => Object.values(faults).reduce((a, b) => a + b, 0);
