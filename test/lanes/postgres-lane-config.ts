/** The machine's PostgreSQL (trust auth), without a database: the lane makes its own. */
export const POSTGRES_SERVER = 'postgres://postgres@127.0.0.1:5432';

/**
 * The PostgreSQL lane: the unit files a second time, every store a test opens in a database of
 * its own on the machine's PostgreSQL (test/helpers/postgres-lane.ts). Left out: files about
 * SQLite itself, and files that already run on both engines.
 */
export const POSTGRES_LANE = {
  name: 'postgres',
  include: ['test/unit/**/*.test.ts'],
  exclude: [
    // The embedded SQLite's own: its file, its backups, data directories from before deployment ids.
    'test/unit/state/store.test.ts',
    'test/unit/state/backup.test.ts',
    'test/unit/services/images/image-adoption.test.ts',
    // The timers driver, over a test table of synchronous SQLite statements.
    'test/unit/services/durable/durable-timers.test.ts',
    // Already on both engines, in databases of their own.
    'test/unit/state/store-postgres.test.ts',
    'test/unit/services/support/replica.test.ts',
    'test/unit/state/repositories-engines.test.ts',
    'test/unit/state/postgres-schema.test.ts',
    'test/unit/state/sql.test.ts',
  ],
  env: { SANDBOXD_TEST_POSTGRES: POSTGRES_SERVER },
  setupFiles: ['test/lanes/postgres-setup.ts'],
  globalSetup: ['test/lanes/postgres-global.ts'],
  fileParallelism: false,
};
