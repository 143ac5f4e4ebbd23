import { createHash } from 'node:crypto';
import { resolve } from 'node:path';
import pg from 'pg';

/**
 * The PostgreSQL lane: the suite a second time with every server's state in PostgreSQL. The
 * lane's vitest projects set SANDBOXD_TEST_POSTGRES to the server's URL (no database in it); each
 * data directory a test opens gets a database of its own, named from the directory's path, so
 * that a server restarted on the same directory finds its state again and two servers on two
 * directories are two deployments, as on SQLite.
 */
export const LANE_SERVER = process.env.SANDBOXD_TEST_POSTGRES;

/** The prefix of the lane's databases: the lane's global setup drops them before and after. */
export const LANE_PREFIX = 'sdlane_';

const made = new Map<string, Promise<string>>();

/** PostgreSQL's code for CREATE DATABASE of a name that exists. */
const DUPLICATE_DATABASE = '42P04';

/** The URL of the lane's database for `dataDir`, made on first use; undefined outside the lane. */
export async function laneDatabaseUrl(dataDir: string): Promise<string | undefined> {
  if (!LANE_SERVER) return undefined;
  const name = LANE_PREFIX + createHash('sha1').update(resolve(dataDir)).digest('hex').slice(0, 20);
  let url = made.get(name);
  if (!url) {
    url = createDatabase(name).then(() => `${LANE_SERVER}/${name}`);
    made.set(name, url);
  }
  return url;
}

async function createDatabase(name: string): Promise<void> {
  const admin = new pg.Client({ connectionString: `${LANE_SERVER}/postgres` });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } catch (err) {
    if ((err as { code?: string }).code !== DUPLICATE_DATABASE) throw err;
  } finally {
    await admin.end();
  }
}

/**
 * Drops the databases this test file made (after its tests: a thousand files' databases would fill
 * the disk). A server the file left running loses its connections.
 */
export async function dropFileDatabases(): Promise<void> {
  if (!LANE_SERVER || made.size === 0) return;
  const names = [...made.keys()];
  made.clear();
  const admin = new pg.Client({ connectionString: `${LANE_SERVER}/postgres` });
  await admin.connect();
  try {
    for (const name of names) await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  } finally {
    await admin.end();
  }
}

/** PostgreSQL's code for DROP DATABASE of one a session is connected to. */
const DATABASE_IN_USE = '55006';

/**
 * Drops the lane's databases no one is connected to: before a run an interrupted run's, after it
 * what a file left. A database in use is another run's (a second lane on the same server): left.
 */
export async function dropLaneDatabases(server: string): Promise<void> {
  const admin = new pg.Client({ connectionString: `${server}/postgres` });
  await admin.connect();
  try {
    const { rows } = await admin.query<{ datname: string }>(
      'SELECT datname FROM pg_database d WHERE starts_with(datname, $1) AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.datname = d.datname)',
      [LANE_PREFIX],
    );
    for (const { datname } of rows) {
      try {
        await admin.query(`DROP DATABASE IF EXISTS ${datname}`);
      } catch (err) {
        if ((err as { code?: string }).code !== DATABASE_IN_USE) throw err;
      }
    }
  } finally {
    await admin.end();
  }
}
