/**
 * The mysql engine against the MariaDB server on 127.0.0.1:3306 (root, no password), in a
 * database of its own (random suffix) that it drops; it fails, never skips, when the server
 * does not answer.
 */
import mysql from 'mysql2/promise';
import { MysqlEngine } from '../../src/services/durable/stores/engines/mysql/mysql-engine.js';
import { runSuffix } from '../helpers/store-engines.js';
import { storeEngineConformance } from './store-engine-conformance.js';

const DB = `sbx_my_conf_${runSuffix()}`;
let stores = 0;

async function admin(sql: string): Promise<void> {
  const connection = await mysql.createConnection({ host: '127.0.0.1', port: 3306, user: 'root' });
  try {
    await connection.query(sql);
  } finally {
    await connection.end();
  }
}

storeEngineConformance({
  title: 'mysql (MariaDB)',
  make: async () => {
    await admin(`CREATE DATABASE ${DB}`);
    return new MysqlEngine();
  },
  target: (engine, config = {}) => {
    stores += 1;
    return { id: `my-${stores}`, name: `my-${stores}`, kind: 'mysql', config: engine.checkConfig({ host: '127.0.0.1', database: DB, ...config }), file: '' };
  },
  placement: { kind: 'server', closed: { host: '127.0.0.1', port: 1 } },
  sql: {
    createTable: (name) => `CREATE TABLE ${name} (id INT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(100) NOT NULL UNIQUE, n BIGINT) ENGINE=InnoDB`,
    param: () => '?',
    // MariaDB's sequence engine (a recursive CTE stops at max_recursive_iterations, 1000).
    series: (n) => `FROM (SELECT seq AS x FROM seq_1_to_${n}) AS s`,
    repeat: (text, times) => `REPEAT('${text.replaceAll("'", "''")}', ${times})`,
    concat: (a, b) => `CONCAT(${a}, ${b})`,
    bytes: (hex) => `X'${hex}'`,
    endless: 'SELECT SLEEP(30)',
    lastInsertId: true,
    namedParams: false,
    full: { skip: 'a mysql store has no size limit of its own: its server and its quotas have' },
  },
  cleanup: () => admin(`DROP DATABASE IF EXISTS ${DB}`),
});
