import { type Kysely, type Migration } from 'kysely';

/** Migration 0013_llm: never edit it once shipped; add a new migration. */
export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    // Provider keys of the LLM gateway. `secret` is the SecretBox ciphertext of a stored key;
    // `env` names a server environment variable read at each request instead. Exactly one is set.
    await db.schema
      .createTable('llm_keys')
      .addColumn('provider', 'text', (c) => c.primaryKey())
      .addColumn('secret', 'text')
      .addColumn('env', 'text')
      .addColumn('last4', 'text')
      .addColumn('base_url', 'text')
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .execute();
    // Token usage counted by the gateway, one row per day, sandbox, provider and model. The
    // sandbox's name is kept beside its uuid, so that usage outlives the sandbox.
    await db.schema
      .createTable('llm_usage')
      .addColumn('day', 'text', (c) => c.notNull())
      .addColumn('sandbox_uuid', 'text', (c) => c.notNull())
      .addColumn('sandbox', 'text', (c) => c.notNull())
      .addColumn('provider', 'text', (c) => c.notNull())
      .addColumn('model', 'text', (c) => c.notNull())
      .addColumn('requests', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('input_tokens', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('output_tokens', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('errors', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('unmetered_requests', 'integer', (c) => c.notNull().defaultTo(0))
      .addPrimaryKeyConstraint('llm_usage_key', ['day', 'sandbox_uuid', 'provider', 'model'])
      .execute();
    await db.schema.createIndex('llm_usage_sandbox').on('llm_usage').columns(['sandbox', 'day']).execute();
    await db.schema.createIndex('llm_usage_sandbox_uuid').on('llm_usage').column('sandbox_uuid').execute();
    // Per-sandbox token budgets (sandbox create field llm_budget_tokens); gone with the sandbox.
    await db.schema
      .createTable('llm_budgets')
      .addColumn('sandbox_uuid', 'text', (c) => c.primaryKey())
      .addColumn('budget_tokens', 'integer', (c) => c.notNull())
      .execute();
  },
};
