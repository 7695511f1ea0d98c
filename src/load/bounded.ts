/**
 * Runs `fn` over `items` with at most `slots` calls at once; each call is told its slot (0..slots-1), so a
 * caller can give every slot a resource of its own (a connection). After a failure no new item starts; the
 * first failure is thrown once every started call has settled — a DuckDB connection must not be closed
 * under a running query (closing one whose COPY was still running deadlocked DuckDB when the query ended).
 */
export async function eachBounded<T>(items: readonly T[], slots: number, fn: (item: T, slot: number) => Promise<void>): Promise<void> {
  let next = 0;
  let failed = false;
  const settled = await Promise.allSettled(
    Array.from({ length: Math.min(slots, items.length) }, async (_, slot) => {
      while (next < items.length && !failed) {
        try {
          await fn(items[next++]!, slot);
        } catch (e) {
          failed = true;
          throw e;
        }
      }
    }),
  );
  const failure = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failure) throw failure.reason;
}
