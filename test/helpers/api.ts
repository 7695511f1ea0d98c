import { request } from 'undici';

/** Reads every page of an explorer list endpoint directly, as the test's independent view of the API. */
export async function fetchAllPages(url: string, apiKey: string, query: Record<string, string | number> = {}): Promise<Record<string, unknown>[]> {
  const out: Record<string, unknown>[] = [];
  for (let offset = 0; offset < 1_000_000; offset += 1000) {
    const u = new URL(url);
    for (const [k, v] of Object.entries({ ...query, limit: 1000, offset })) u.searchParams.set(k, String(v));
    const res = await request(u, { headers: { 'api-key': apiKey } });
    const body = (await res.body.json()) as { status: string; results: { count: string; data: Record<string, unknown>[] } };
    if (body.status !== '200') throw new Error(`unexpected envelope ${JSON.stringify(body).slice(0, 200)}`);
    out.push(...body.results.data);
    if (out.length >= Number(body.results.count)) break;
  }
  return out;
}
