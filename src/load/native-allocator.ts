// Imported for its side effect, before anything loads DuckDB: see DUCKDB_ALLOCATOR_CONF.

/**
 * Options for DuckDB's own allocator (a jemalloc linked into the library), which reads them once, when the
 * library loads, from `DUCKDB_JE_MALLOC_CONF`; a value the user set is left as it is.
 *
 * Why: a run pushes all its data through DuckDB (typing, sorting, Parquet writing), some 100 MB a second, and
 * jemalloc keeps what DuckDB frees for reuse. With DuckDB's own options (an arena per two cores, per-thread
 * caches, freed pages returned after a second or more, lazily) it held 80-170 MB freed but resident beside
 * 50-170 MB in use, read with gdb (`mallctl` stats) from the 5M-row memory bench: most of a run's peak above
 * DuckDB's memory limit. Nothing returns it sooner: DuckDB purges on its worker threads' idle time, and a run
 * keeps DuckDB on one thread while it fetches, so there are none.
 * - `narenas:1`: one arena, so memory freed on one thread serves the next allocation on any other (the Node
 *   binding runs queries on libuv's threads, DuckDB on its own);
 * - `tcache:false`: no per-thread caches of freed blocks beside it;
 * - `oversize_threshold`: allocations of 8 MiB and more (JSON read buffers, a row group's Parquet pages) come
 *   from jemalloc's dedicated arena, which returns them to the system as they are freed;
 * - `muzzy_decay_ms:0`: pages past their decay go back to the system (MADV_DONTNEED) instead of being marked
 *   lazily free first, which leaves them counted in the process's resident memory until the kernel wants them.
 * Returning every page at once (`dirty_decay_ms:0`) cut the peak as much again but cost a third of the run's
 * speed in page faults and TLB shootdowns; these cost no more than the bench's run-to-run spread.
 */
export const DUCKDB_ALLOCATOR_CONF = 'narenas:1,tcache:false,oversize_threshold:8388608,muzzy_decay_ms:0';

export const ALLOCATOR_ENV = 'DUCKDB_JE_MALLOC_CONF';

if (process.env[ALLOCATOR_ENV] === undefined) process.env[ALLOCATOR_ENV] = DUCKDB_ALLOCATOR_CONF;
