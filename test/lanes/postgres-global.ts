import { dropLaneDatabases } from '../helpers/postgres-lane.js';
import { POSTGRES_SERVER } from './postgres-lane-config.js';

/** The PostgreSQL lane's global setup: no database an earlier run left before it, none this one left after it (another run's in use stay). */
export default async function setup(): Promise<() => Promise<void>> {
  const server = POSTGRES_SERVER;
  await dropLaneDatabases(server);
  return () => dropLaneDatabases(server);
}
