import fc from 'fast-check';
import { getAddress, keccak256 } from 'viem';
import { describe, expect, it } from 'vitest';
import { keccak256Hex, toChecksumAddress } from '../src/evm/keccak.js';

// src/evm/keccak.ts is our own Keccak-256 (the simulator checksums every address it serves without
// allocating): it must say exactly what viem says, which decoding uses.
describe('evm helpers', () => {
  it('Keccak-256 and EIP-55 agree with viem', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => keccak256Hex(bytes) === keccak256(bytes)),
      { seed: 35, numRuns: 300 },
    );
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 20, maxLength: 20 }), (bytes) => {
        const lower = `0x${Buffer.from(bytes).toString('hex')}`;
        return toChecksumAddress(lower) === getAddress(lower);
      }),
      { seed: 35, numRuns: 300 },
    );
    expect(toChecksumAddress('0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed')).toBe('0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed');
  });
});
