import { ChainlakeError } from '../errors.js';

/**
 * A decode specification (the job's `decode` key, `chainlake decode`'s flags) that names something wrong. A file of
 * its own: the datasets a spec means (datasets.ts, which spec.ts imports) refuse a name with it too.
 */
export class DecodeSpecError extends ChainlakeError {
  constructor(message: string) {
    super(message, { code: 'CHAINLAKE_DECODE_SPEC' });
  }
}
