import { type Kysely, type Migration } from 'kysely';

/** Migration 0005_detached_results: never edit it once shipped; add a new migration. */
export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    // The end of a detached command and its output, kept on the host when the service observes
    // it: the sandbox's agent forgets them when the sandbox stops.
    await db.schema.alterTable('detached_commands').addColumn('status', 'text').execute();
    await db.schema.alterTable('detached_commands').addColumn('exit_code', 'integer').execute();
    await db.schema.alterTable('detached_commands').addColumn('finished_at', 'text').execute();
    await db.schema
      .createTable('detached_outputs')
      .addColumn('command_id', 'text', (c) => c.notNull())
      .addColumn('stream', 'text', (c) => c.notNull())
      .addColumn('content', 'blob', (c) => c.notNull())
      .addColumn('start', 'integer', (c) => c.notNull())
      .addPrimaryKeyConstraint('detached_outputs_pk', ['command_id', 'stream'])
      .execute();
  },
};
