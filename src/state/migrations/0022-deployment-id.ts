import { sql, type Kysely, type Migration } from 'kysely';

/**
 * Migration 0022_deployment_id: never edit it once shipped; add a new migration.
 *
 * The deployment id names a server's engine objects apart from other servers' on the same
 * engine (meta `deployment_id`; see store.ts). A data directory made before it had an
 * `instance_id` that already labelled its containers, snapshot and archive images and volumes
 * (`sandboxd.instance`): it becomes the deployment id, so they stay this deployment's. Such a
 * directory also keeps the network name its containers are attached to (`sandboxd`, the old
 * default: meta `network_name`), and its built images, tagged outside any deployment before,
 * are adopted at its first start (meta `adopt_built_images`, see ImageService.adoptLegacy).
 * A new data directory gets its id and network name from store.ts at its first open.
 */
export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    const rows = await sql<{ value: string }>`SELECT value FROM meta WHERE key = 'instance_id'`.execute(db);
    const before = rows.rows[0]?.value;
    if (before === undefined) return;
    await sql`INSERT INTO meta (key, value) VALUES ('deployment_id', ${before}), ('network_name', 'sandboxd'), ('adopt_built_images', '1')`.execute(db);
    await sql`DELETE FROM meta WHERE key = 'instance_id'`.execute(db);
  },
};
