import type { SqlDialect } from './store-sql-cases.js';

/** The suite's SQL as SQLite spells it, on the host and in a sandbox alike. */
export const SQLITE_DIALECT: SqlDialect = {
  createTable: (name) => `CREATE TABLE ${name} (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, n INTEGER)`,
  param: () => '?',
  series: (n) => `FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ${n}) SELECT x FROM c)`,
  // replace() over a run of zero bytes' hex: SQLite has no repeat().
  repeat: (text, times) => `replace(hex(zeroblob(${times})), '00', '${text.replaceAll("'", "''")}')`,
  concat: (a, b) => `${a} || ${b}`,
  bytes: (hex) => `x'${hex}'`,
  endless: 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c',
  lastInsertId: true,
  namedParams: true,
  full: {
    config: { max_bytes: 256 * 1024 },
    table: 'filled',
    fill: 'INSERT INTO filled (name) VALUES (zeroblob(400000))',
  },
};
