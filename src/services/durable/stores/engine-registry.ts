import type { Logger } from '../../../telemetry/logger.js';
import type { ExecApi } from '../../commands/api.js';
import type { Clock } from '../../support/clock.js';
import { KvStoreEngine } from './engines/kv/kv-engine.js';
import { MysqlEngine } from './engines/mysql/mysql-engine.js';
import { PostgresEngine } from './engines/postgres/postgres-engine.js';
import { QueueStoreEngine } from './engines/queue/queue-engine.js';
import { RedisEngine } from './engines/redis/redis-engine.js';
import type { StoreEngine } from './store-engine.js';
import { SqliteStoreEngine } from './engines/sqlite/sqlite-engine.js';

export interface StoreEnginesInput {
  /** Child processes for host SQLite SQL (`--store-workers`). */
  workers: number;
  /** Runs an in-sandbox sqlite store's python (a store bound to a sandbox with `config.path`). */
  exec: Pick<ExecApi, 'exec'>;
  logger: Logger;
  /** Expiries, visibility timeouts and retention of kv and queue stores. */
  clock: Clock;
}

/** The engine of every store kind this server offers, each made once for the server's lifetime. */
export function storeEngines({ workers, exec, logger, clock }: StoreEnginesInput): StoreEngine[] {
  return [
    new SqliteStoreEngine({ workers, exec: (sandbox, input) => exec.exec(sandbox, input), logger: logger.child({ engine: 'sqlite' }) }),
    new KvStoreEngine({ clock, logger: logger.child({ engine: 'kv' }) }),
    new QueueStoreEngine({ clock, logger: logger.child({ engine: 'queue' }) }),
    new PostgresEngine(),
    new MysqlEngine(),
    new RedisEngine(),
  ];
}
