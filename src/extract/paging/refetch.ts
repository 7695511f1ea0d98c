/** The rows moved while we paged: the window is fetched again. */
export class CountDrift extends Error {}

/** The server's cap is smaller than the one we paged by: the window is fetched again under it. */
export class CapLearned extends Error {}
