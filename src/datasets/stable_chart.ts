import type { DatasetDef } from './dataset.js';

/** Finance GET /stablecoin/total_chart: the stable token's price, volume and supply over time. */
export const stable_chart: DatasetDef = {
  name: 'stable_chart',
  doc: 'Stable-token chart points (finance total_chart): price, volume within the point’s interval, and supply. One row per (unit, unit_multiplier, timestamp); partitioned by the point’s UTC date.',
  kind: 'series',
  endpoints: [
    {
      id: 'total_chart',
      api: 'finance',
      ref: '/stablecoin/total_chart',
      method: 'GET',
      scope: 'chart',
      path: '/stablecoin/total_chart',
      scopeQuery: { unit: 'unit', unit_count: 'unit_count', unit_multiplier: 'unit_multiplier' },
      paging: { kind: 'none' },
      entriesAt: ['data', 'history'],
    },
  ],
  naturalKey: ['unit', 'unit_multiplier', 'timestamp'],
  partition: 'point_date',
  partitionFrom: 'timestamp',
  sortBy: ['unit', 'unit_multiplier', 'timestamp'],
  notes: [
    'A point’s volume covers its interval, so points of different granularities are different rows: the key includes unit and unit_multiplier.',
    'Each run fetches the last unit_count points as of the run; overlapping runs converge by key (a later fetch of a point replaces it).',
  ],
  columns: [
    { name: 'unit', source: '$scope.unit', kind: 'text', nullable: false, doc: 'Time unit of the request: minute, hour or day.' },
    { name: 'unit_multiplier', source: '$scope.unit_multiplier', kind: 'bigint', nullable: false, doc: 'Units per point of the request.' },
    { name: 'timestamp', kind: 'timestamp', nullable: false, doc: 'Start of the point’s interval, UTC (the API gives epoch milliseconds).' },
    { name: 'date_time', source: 'dateTime', kind: 'text', nullable: true, doc: 'The point’s time as text, exactly as the API gives it.' },
    { name: 'price', kind: 'double', nullable: true, doc: 'Price of the stable token in a dollar stablecoin (the API sends decimal text).' },
    { name: 'volume', kind: 'double', nullable: true, doc: 'Trading volume within the point’s interval.' },
    { name: 'total_supply', kind: 'double', nullable: true, doc: 'Supply at the point’s time.' },
  ],
};
