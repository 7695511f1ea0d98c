import { describe, expect, it } from 'vitest';
import { IdleLine } from '../../src/distributed/worker.js';

describe("the worker's idle line", () => {
  it('is said once each time the worker runs out of work, also when its loop never saw the work going on', () => {
    const line = new IdleLine();
    // [nothing left, windows dealt with] per look of the worker's loop, and whether the idle line is said.
    const looks: [boolean, number, boolean][] = [
      [true, 0, true], // started with nothing queued
      [true, 0, false],
      [false, 0, false], // a window is being fetched
      [true, 2, true], // fetched and committed: idle again
      [true, 2, false],
      [true, 4, true], // a window fetched and committed between two looks: still a new idle line
      [true, 4, false],
    ];
    expect(looks.map(([left, done]) => line.due(left, done))).toEqual(looks.map(([, , said]) => said));
  });
});
