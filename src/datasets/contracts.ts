import type { DatasetDef, EndpointDef } from './dataset.js';

/**
 * An unverified contract: the spec's simulator answers 404 "Contract source code not verified", the real
 * service HTTP 200 with `results: {}` and "contract is not yet verified" (docs/api-assumptions.md).
 */
const unverified: EndpointDef['absentWhen'] = { httpStatus: [400, 404, 422], message: /not( yet)? verified|unverified/i, emptyResults: true };

/** Explorer #14 (ABI) and #15 (code record) of verified contracts; unverified ones recorded as such. */
export const contracts: DatasetDef = {
  name: 'contracts',
  doc: 'Verified source records of scoped contracts as of the run: the ABI (explorer #14) and the code record (#15). An unverified contract is a row with verified = false and the API’s message, not an error. One row per (contract_address, origin_endpoint) per snapshot date.',
  kind: 'snapshot',
  endpoints: [
    {
      id: 'contract_abi',
      api: 'explorer',
      ref: '#14 GET /v1/contracts/{contract_address}/abi',
      method: 'GET',
      scope: 'contract',
      path: '/v1/contracts/{contract}/abi',
      paging: { kind: 'none' },
      // The whole results object is the one entry: its `data` (the ABI item list) becomes the abi column.
      entriesAt: [],
      entryFields: { rename: { data: 'abi' }, fill: { contract_address: '$scope.contract' } },
      absentWhen: unverified,
    },
    {
      id: 'contract_code',
      api: 'explorer',
      ref: '#15 GET /v1/contracts/{contract_address}/code',
      method: 'GET',
      scope: 'contract',
      path: '/v1/contracts/{contract}/code',
      paging: { kind: 'none' },
      entriesAt: ['data'],
      entryFields: { rename: { address: 'contract_address', contract_abi: 'abi' }, fill: { contract_address: '$scope.contract' } },
      absentWhen: unverified,
    },
  ],
  naturalKey: ['contract_address', 'origin_endpoint'],
  partition: 'snapshot_date',
  sortBy: ['contract_address', 'origin_endpoint'],
  notes: [
    'Both endpoints give the ABI; #15 adds the code record. Each gives its own row (origin_endpoint), so a query picks the one it needs.',
    'Unverified contracts (the API refuses with "not verified", or answers an empty success) are rows with verified = false, api_message set and the record columns NULL.',
  ],
  columns: [
    { name: 'contract_address', kind: 'address', nullable: false, doc: 'The contract, lower-case.' },
    { name: 'origin_endpoint', source: '$meta.endpoint', kind: 'text', nullable: false, doc: 'contract_abi (#14) or contract_code (#15).' },
    {
      name: 'verified',
      source: '$meta.found',
      kind: 'bool',
      nullable: false,
      doc: 'false when the API says the contract is not verified (then the record columns are NULL).',
    },
    { name: 'api_message', source: '$meta.api_message', kind: 'text', nullable: true, doc: 'The API’s message for an unverified contract; NULL otherwise.' },
    { name: 'abi', kind: 'json', nullable: true, doc: 'The ABI: a JSON array of items (type, name, inputs, outputs, stateMutability, anonymous).' },
    { name: 'contract_name', kind: 'text', nullable: true, doc: 'Contract name (#15).' },
    { name: 'compiler', kind: 'text', nullable: true, doc: 'Compiler version (#15).' },
    { name: 'runs_optimizer', kind: 'bigint', nullable: true, doc: 'Optimizer run count (#15).' },
    { name: 'optimization_enabled', kind: 'bigint', nullable: true, doc: 'Optimization flag as the API gives it: 1 enabled, any other number disabled (#15).' },
    { name: 'libraries', kind: 'text', nullable: true, doc: 'Library list as the API gives it (#15).' },
    { name: 'verify_date', kind: 'timestamp', nullable: true, doc: 'When the contract was verified, UTC (#15).' },
    { name: 'verify_status', kind: 'text', nullable: true, doc: 'Verification status as the API gives it (#15).' },
    { name: 'verify_message', kind: 'text', nullable: true, doc: 'Message written at verification (#15).' },
    { name: 'logo', kind: 'text', nullable: true, doc: 'Logo set at verification; NULL when none (#15).' },
    { name: 'contract_code', kind: 'hex', nullable: true, doc: 'Deployed bytecode, hex, lower-case (#15).' },
    { name: 'contract_source', kind: 'text', nullable: true, doc: 'Source code exactly as the API gives it (base64 encoded in the sample) (#15).' },
    { name: 'constructor_arguments', kind: 'text', nullable: true, doc: 'Constructor arguments (#15).' },
    {
      name: 'swarm_source',
      source: 'swarm source',
      kind: 'text',
      nullable: true,
      doc: 'Address of the swarm source; the API’s field is named "swarm source" (#15).',
    },
  ],
};
