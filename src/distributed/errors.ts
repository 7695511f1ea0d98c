/**
 * The distributed mode's errors, apart from the modules that raise them: the library's entry exports them
 * (src/index.ts) without loading PostgreSQL's client or the committer.
 */
import { ChainlakeError } from '../errors.js';

/** Raised for a control plane that cannot be reached or read: a setup problem a person fixes (exit 2). */
export class ControlPlaneError extends ChainlakeError {
  constructor(message: string, hint?: string, cause?: unknown) {
    super(message, { code: 'CHAINLAKE_CONTROL_PLANE', hint, cause });
  }
}

/** A committer whose lease another worker took: it stops committing, and the other goes on. */
export class LeaseLostError extends ChainlakeError {
  constructor(holder: string) {
    super(`the committer lease is no longer held by ${holder}: another worker commits now`, { code: 'CHAINLAKE_LEASE_LOST' });
  }
}
