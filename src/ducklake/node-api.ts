// DuckDB's Node API, required rather than imported. The package is CommonJS of some 180 files re-exported from
// its index; an ES import of it has Node's module lexer parse every one of them for their export names, at the
// start of every process (docs/performance.md, "Startup"). `require` loads the same modules without that.
// Types come from the package as usual (`import type`); values the code uses are re-exported here.

import { createRequire } from 'node:module';
import type * as Api from '@duckdb/node-api';

const api = createRequire(import.meta.url)('@duckdb/node-api') as typeof Api;

export const DuckDBInstance = api.DuckDBInstance;
export type DuckDBInstance = Api.DuckDBInstance;
export const DuckDBResult = api.DuckDBResult;
export type DuckDBResult = Api.DuckDBResult;
export const DuckDBDataChunk = api.DuckDBDataChunk;
export type DuckDBDataChunk = Api.DuckDBDataChunk;
export const DuckDBTypeId = api.DuckDBTypeId;
export type DuckDBTypeId = Api.DuckDBTypeId;
export const StatementType = api.StatementType;
export type StatementType = Api.StatementType;
export const DuckDBBlobValue = api.DuckDBBlobValue;
export type DuckDBBlobValue = Api.DuckDBBlobValue;
export const DuckDBDateValue = api.DuckDBDateValue;
export type DuckDBDateValue = Api.DuckDBDateValue;
export const DuckDBDecimalValue = api.DuckDBDecimalValue;
export type DuckDBDecimalValue = Api.DuckDBDecimalValue;
export const DuckDBListValue = api.DuckDBListValue;
export type DuckDBListValue = Api.DuckDBListValue;
export const DuckDBTimestampValue = api.DuckDBTimestampValue;
export type DuckDBTimestampValue = Api.DuckDBTimestampValue;
export const DuckDBTimestampTZValue = api.DuckDBTimestampTZValue;
export type DuckDBTimestampTZValue = Api.DuckDBTimestampTZValue;
export const { version, BIGINT, BOOLEAN, DOUBLE, VARCHAR, LIST, listValue, JSDuckDBValueConverter, JsonDuckDBValueConverter } = api;
