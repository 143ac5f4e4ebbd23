/**
 * The postgres engine against the PostgreSQL server on 127.0.0.1:5432 (user postgres, trust),
 * in a database of its own (random suffix) that it drops; it fails, never skips, when the
 * server does not answer.
 */
import pg from 'pg';
import { PostgresEngine } from '../../src/services/durable/stores/engines/postgres/postgres-engine.js';
import { runSuffix } from '../helpers/store-engines.js';
import { storeEngineConformance } from './store-engine-conformance.js';

const DB = `sbx_pg_conf_${runSuffix()}`;
let stores = 0;

async function admin(sql: string): Promise<void> {
  const client = new pg.Client({ host: '127.0.0.1', port: 5432, user: 'postgres', database: 'postgres' });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

storeEngineConformance({
  title: 'postgres',
  make: async () => {
    await admin(`CREATE DATABASE ${DB}`);
    return new PostgresEngine();
  },
  target: (engine, config = {}) => {
    stores += 1;
    return { id: `pg-${stores}`, name: `pg-${stores}`, kind: 'postgres', config: engine.checkConfig({ host: '127.0.0.1', database: DB, ...config }), file: '' };
  },
  placement: { kind: 'server', closed: { host: '127.0.0.1', port: 1 } },
  sql: {
    createTable: (name) => `CREATE TABLE ${name} (id serial PRIMARY KEY, name text NOT NULL UNIQUE, n int8)`,
    param: (i) => `$${i}`,
    series: (n) => `FROM generate_series(1, ${n}) AS s(x)`,
    repeat: (text, times) => `repeat('${text.replaceAll("'", "''")}', ${times})`,
    concat: (a, b) => `${a} || ${b}`,
    bytes: (hex) => `decode('${hex}', 'hex')`,
    endless: 'SELECT pg_sleep(30)',
    lastInsertId: false,
    namedParams: false,
    full: { skip: 'a postgres store has no size limit of its own: its server and its quotas have' },
  },
  cleanup: () => admin(`DROP DATABASE IF EXISTS ${DB} WITH (FORCE)`),
});
