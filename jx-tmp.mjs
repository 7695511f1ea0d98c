import { DuckDBInstance } from '@duckdb/node-api';
import { writeFileSync, readFileSync } from 'node:fs';
const mode = process.argv[2];
const entry = (k) => ({ block_number: String(1000 + k), timestamp: '2024-03-01T00:00:12Z', transaction_hash: '0x' + 'ab'.repeat(32), block_hash: '0x' + 'cd'.repeat(32), sender: '0x' + 'ef'.repeat(20), receiver: '0x' + '12'.repeat(20), value: '141200000000000000', nonce: String(k), gas_used: '21000', gas_price: '1000000000', tx_status: '1', input: '0x' + 'a9059cbb'.repeat(20), confirmations: '23967', tx_fee: '945000000000000' });
if (mode === 'gen') {
  const line = () => JSON.stringify({ p: '2024-03-01', k: {}, b: { results: { data: Array.from({ length: 1000 }, (_, k) => entry(k)) } } }) + '\n';
  const l = line(); console.log('line bytes', l.length);
  writeFileSync('/tmp/jx/one.ndjson', l.repeat(40));
  for (const per of [1, 2, 4, 8]) for (let f = 0; f < 40 / per; f++) writeFileSync(`/tmp/jx/p${per}-${f}.ndjson`, l.repeat(per));
  process.exit(0);
}
const i = await DuckDBInstance.create(':memory:', { threads: '1', memory_limit: '256MB' });
const c = await i.connect();
const cols = Object.keys(entry(0)).map((k) => `${k} VARCHAR`).join(', ');
const per = Number(mode.slice(1));
const files = mode === 'one' ? ["'/tmp/jx/one.ndjson'"] : Array.from({ length: 40 / per }, (_, f) => `'/tmp/jx/p${per}-${f}.ndjson'`);
const t = performance.now();
await c.run(`COPY (SELECT unnest(b.results.data, recursive := true) FROM read_json([${files.join(',')}], format='newline_delimited', maximum_object_size=16777216, columns={'p': 'VARCHAR', 'k': 'STRUCT(x VARCHAR)', 'b': 'STRUCT(results STRUCT(data STRUCT(${cols})[]))'})) TO '/tmp/jx/out.parquet' (FORMAT parquet, COMPRESSION uncompressed)`);
const ms = performance.now() - t;
const hwm = /VmHWM:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))[1];
console.log(mode, ms.toFixed(0), 'ms', 'hwm MB', (hwm / 1024).toFixed(0));
