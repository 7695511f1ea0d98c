/**
 * Which lake rows an endpoint's scope lists: what `verify` counts in the lake for a window, to compare with the
 * `count` the API gives for the same scope and block range. Only where the rule is exactly the API's (the
 * simulator's listings and the spec agree: an account's listing holds the rows the address sent, received or
 * created); elsewhere the count cannot be compared and verify says so.
 */

/** An address-scoped listing: its rows are those where the scope's address is in one of these columns. */
export interface AddressScope {
  /** Lower-case address columns; a row belongs to the scope when the address is in any of them. */
  columns: readonly string[];
  /** The block number column. */
  blockColumn: string;
}

const ADDRESS_SCOPES: Readonly<Record<string, AddressScope>> = {
  // condition=all: sender, receiver, or the contract the transaction created.
  'transactions/account_transactions': { columns: ['sender', 'receiver', 'contract_address'], blockColumn: 'block_number' },
  'erc20_transfers/account_erc20_transfers': { columns: ['sender', 'receiver'], blockColumn: 'block_number' },
};

/** The rule for a dataset's endpoint, if verify knows one. */
export function addressScopeOf(dataset: string, endpoint: string): AddressScope | undefined {
  return ADDRESS_SCOPES[`${dataset}/${endpoint}`];
}
