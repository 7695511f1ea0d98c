// Fast hex rendering of hash-derived words, and the decimal/ISO formatting the API uses.

const BYTE_HEX: string[] = [];
for (let i = 0; i < 256; i++) BYTE_HEX.push(i.toString(16).padStart(2, '0'));

export function word8(w: number): string {
  return BYTE_HEX[(w >>> 24) & 0xff]! + BYTE_HEX[(w >>> 16) & 0xff]! + BYTE_HEX[(w >>> 8) & 0xff]! + BYTE_HEX[w & 0xff]!;
}

/** 64-char word padding of a hex body (no 0x). */
export function pad64(hexBody: string): string {
  return hexBody.length >= 64 ? hexBody.slice(-64) : '0'.repeat(64 - hexBody.length) + hexBody;
}

export const MAX_UINT256 = '115792089237316195423570985008687907853269984665640564039457584007913129639935';
export const MAX_UINT256_HEX = 'f'.repeat(64);

const GWEI_SUFFIX = '000000000';
/** A whole number of gwei as a wei decimal string. */
export function gweiToWei(gwei: number): string {
  return gwei === 0 ? '0' : String(gwei) + GWEI_SUFFIX;
}

/** Seconds since epoch -> `YYYY-MM-DDTHH:MM:SSZ`. */
export function isoSeconds(sec: number): string {
  return new Date(sec * 1000).toISOString().slice(0, 19) + 'Z';
}

export function isHexBody(s: string, len: number): boolean {
  if (s.length !== len) return false;
  for (let i = 0; i < len; i++) {
    const c = s.charCodeAt(i);
    if (!((c >= 48 && c <= 57) || (c >= 97 && c <= 102) || (c >= 65 && c <= 70))) return false;
  }
  return true;
}

export function isAddress(s: string): boolean {
  return s.length === 42 && (s.startsWith('0x') || s.startsWith('0X')) && isHexBody(s.slice(2), 40);
}

export function isHash(s: string): boolean {
  return s.length === 66 && (s.startsWith('0x') || s.startsWith('0X')) && isHexBody(s.slice(2), 64);
}
