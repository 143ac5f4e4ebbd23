import { afterAll, vi } from 'vitest';
import { dropFileDatabases, laneDatabaseUrl } from '../helpers/postgres-lane.js';

/**
 * The PostgreSQL lane's setup file: every store a test opens without a database URL opens the
 * lane's database of its data directory (see postgres-lane.ts).
 */
vi.mock('../../src/state/store.js', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../src/state/store.js')>();
  return {
    ...real,
    openStore: async (...[dataDir, migrations, options = {}]: Parameters<typeof real.openStore>) =>
      real.openStore(dataDir, migrations, { ...options, databaseUrl: options.databaseUrl ?? (await laneDatabaseUrl(dataDir)) }),
  };
});

afterAll(async () => {
  await dropFileDatabases();
});
