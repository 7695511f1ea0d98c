// The simulator's dialects. `spec` (the default) implements the two API specs with the choices written in
// docs/api-assumptions.md. `real` reproduces what the real services were seen to do where they differ from
// the spec or from those choices (docs/simulator.md, "The real dialect"), so that tests can prove chainlake
// survives them.

export type Dialect = 'spec' | 'real';
export const DIALECTS: readonly Dialect[] = ['spec', 'real'];

/** The real explorer's answer to the ABI or code of an unverified contract: a success with nothing in it. */
export const REAL_UNVERIFIED_BODY = JSON.stringify({ status: '200', message: 'contract is not yet verified', results: {} });

/** The real explorer refuses `GET /v1/blocks/latest` (the spec documents only a block number). */
export const REAL_LATEST_REFUSAL = { status: 400, message: "Invalid block number 'latest'" };

/** The coin whose name the real finance service uses in the stable-coin chart's path instead of `stablecoin`. */
export const REAL_STABLE_COIN = 'usdx';

/**
 * The finance path segments the real dialect serves instead of the spec's: the stable-coin chart is under its
 * coin's name (`/usdx/total_chart`); the spec's `/stablecoin/total_chart` answers 404 there.
 */
export function realFinanceSegments(segs: string[]): string[] | 'gone' {
  if (segs[0] === REAL_STABLE_COIN && segs[1] === 'total_chart') return ['stablecoin', ...segs.slice(1)];
  if (segs[0] === 'stablecoin') return 'gone';
  return segs;
}
