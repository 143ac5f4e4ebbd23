import { dropLaneDatabases } from '../helpers/postgres-lane.js';
import { POSTGRES_SERVER } from './postgres-lane-config.js';

/** The PostgreSQL lane's global setup: no database of an earlier run before it, none of this one after it. */
export default async function setup(): Promise<() => Promise<void>> {
  const server = POSTGRES_SERVER;
  await dropLaneDatabases(server);
  return async () => void (await dropLaneDatabases(server));
}
