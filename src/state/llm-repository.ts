import { sql, type Kysely, type Selectable } from 'kysely';
import type { Database, LlmKeyTable, LlmUsageTable } from './schema.js';

/** A provider key as kept: `secret` is ciphertext, never a key. */
export type LlmKeyRecord = Selectable<LlmKeyTable>;

/** What one request through the gateway adds to its usage row. */
export type LlmUsageDelta = Omit<LlmUsageTable, 'day'> & { day: string };

/** Sums of usage rows. */
export interface LlmUsageSums {
  requests: number;
  input_tokens: number;
  output_tokens: number;
  errors: number;
  unmetered_requests: number;
}

/** Which usage rows a query reads: days from `since` to `until` (YYYY-MM-DD, both included). */
export interface LlmUsageRange {
  since: string;
  until: string;
  provider?: string;
  sandbox?: string;
}

const SUMS = [
  sql<number>`coalesce(sum(requests), 0)`.as('requests'),
  sql<number>`coalesce(sum(input_tokens), 0)`.as('input_tokens'),
  sql<number>`coalesce(sum(output_tokens), 0)`.as('output_tokens'),
  sql<number>`coalesce(sum(errors), 0)`.as('errors'),
  sql<number>`coalesce(sum(unmetered_requests), 0)`.as('unmetered_requests'),
] as const;

/** LLM provider keys, usage rows and sandbox budgets in the state store. */
export class LlmRepository {
  constructor(private readonly db: Kysely<Database>) {}

  async keys(): Promise<LlmKeyRecord[]> {
    return this.db.selectFrom('llm_keys').selectAll().orderBy('provider').execute();
  }

  async key(provider: string): Promise<LlmKeyRecord | undefined> {
    return this.db.selectFrom('llm_keys').selectAll().where('provider', '=', provider).executeTakeFirst();
  }

  /** Inserts or replaces a provider's key. */
  async putKey(record: LlmKeyRecord): Promise<void> {
    await this.db
      .insertInto('llm_keys')
      .values(record)
      .onConflict((oc) => oc.column('provider').doUpdateSet({ secret: record.secret, env: record.env, last4: record.last4, base_url: record.base_url, updated_at: record.updated_at }))
      .execute();
  }

  /** False when the provider had no key. */
  async deleteKey(provider: string): Promise<boolean> {
    const result = await this.db.deleteFrom('llm_keys').where('provider', '=', provider).executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }

  /** Adds one request's counts to its (day, sandbox, provider, model) row; the sandbox's latest name wins. */
  async addUsage(delta: LlmUsageDelta): Promise<void> {
    await this.db
      .insertInto('llm_usage')
      .values(delta)
      .onConflict((oc) =>
        oc.columns(['day', 'sandbox_uuid', 'provider', 'model']).doUpdateSet((eb) => ({
          sandbox: eb.ref('excluded.sandbox'),
          requests: sql`llm_usage.requests + excluded.requests`,
          input_tokens: sql`llm_usage.input_tokens + excluded.input_tokens`,
          output_tokens: sql`llm_usage.output_tokens + excluded.output_tokens`,
          errors: sql`llm_usage.errors + excluded.errors`,
          unmetered_requests: sql`llm_usage.unmetered_requests + excluded.unmetered_requests`,
        })),
      )
      .execute();
  }

  async totals(range: LlmUsageRange): Promise<LlmUsageSums> {
    return (await this.ranged(range).select(SUMS).executeTakeFirstOrThrow()) as LlmUsageSums;
  }

  /** Sums per sandbox name, most tokens first. */
  async bySandbox(range: LlmUsageRange): Promise<(LlmUsageSums & { sandbox: string })[]> {
    return (await this.ranged(range)
      .select(['sandbox', ...SUMS])
      .groupBy('sandbox')
      .orderBy(sql`sum(input_tokens + output_tokens)`, 'desc')
      .orderBy('sandbox')
      .execute()) as (LlmUsageSums & { sandbox: string })[];
  }

  /** Sums per provider and model, most tokens first. */
  async byModel(range: LlmUsageRange): Promise<(LlmUsageSums & { provider: string; model: string })[]> {
    return (await this.ranged(range)
      .select(['provider', 'model', ...SUMS])
      .groupBy(['provider', 'model'])
      .orderBy(sql`sum(input_tokens + output_tokens)`, 'desc')
      .orderBy('provider')
      .orderBy('model')
      .execute()) as (LlmUsageSums & { provider: string; model: string })[];
  }

  /** Sums per day, oldest first. */
  async byDay(range: LlmUsageRange): Promise<(LlmUsageSums & { day: string })[]> {
    return (await this.ranged(range).select(['day', ...SUMS]).groupBy('day').orderBy('day').execute()) as (LlmUsageSums & { day: string })[];
  }

  /** Whether any usage row names this sandbox (of any day). */
  async seen(sandbox: string): Promise<boolean> {
    return (await this.db.selectFrom('llm_usage').select('sandbox').where('sandbox', '=', sandbox).limit(1).executeTakeFirst()) !== undefined;
  }

  /** Tokens (input and output) a sandbox has used, over all time. */
  async tokensUsed(sandboxUuid: string): Promise<number> {
    const row = await this.db
      .selectFrom('llm_usage')
      .select(sql<number>`coalesce(sum(input_tokens + output_tokens), 0)`.as('tokens'))
      .where('sandbox_uuid', '=', sandboxUuid)
      .executeTakeFirstOrThrow();
    return Number(row.tokens);
  }

  async budget(sandboxUuid: string): Promise<number | undefined> {
    const row = await this.db.selectFrom('llm_budgets').select('budget_tokens').where('sandbox_uuid', '=', sandboxUuid).executeTakeFirst();
    return row?.budget_tokens;
  }

  async setBudget(sandboxUuid: string, budgetTokens: number): Promise<void> {
    await this.db
      .insertInto('llm_budgets')
      .values({ sandbox_uuid: sandboxUuid, budget_tokens: budgetTokens })
      .onConflict((oc) => oc.column('sandbox_uuid').doUpdateSet({ budget_tokens: budgetTokens }))
      .execute();
  }

  async deleteBudget(sandboxUuid: string): Promise<void> {
    await this.db.deleteFrom('llm_budgets').where('sandbox_uuid', '=', sandboxUuid).execute();
  }

  private ranged(range: LlmUsageRange) {
    let query = this.db.selectFrom('llm_usage').where('day', '>=', range.since).where('day', '<=', range.until);
    if (range.provider) query = query.where('provider', '=', range.provider);
    if (range.sandbox) query = query.where('sandbox', '=', range.sandbox);
    return query;
  }
}
