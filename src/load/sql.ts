/** SQL quoting for identifiers and string literals built from declarations and paths. */
export const ident = (name: string): string => `"${name.replace(/"/g, '""')}"`;
export const literal = (text: string): string => `'${text.replace(/'/g, "''")}'`;
export const literalList = (items: readonly string[]): string => `[${items.map(literal).join(', ')}]`;
