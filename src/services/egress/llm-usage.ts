import { badRequest, notFound } from '../../errors.js';
import type { LlmRepository, LlmUsageRange, LlmUsageSums } from '../../state/llm-repository.js';
import type { Clock } from '../support/clock.js';

/** Days a usage report covers when `since` is not given (today included). */
const DEFAULT_USAGE_DAYS = 30;
const DAY_MS = 86_400_000;
const DATE = /^\d{4}-\d{2}-\d{2}$/;

/** GET /llm/usage's query. */
export interface UsageQuery {
  since?: string | undefined;
  until?: string | undefined;
  provider?: string | undefined;
}

const sums = (row: LlmUsageSums): LlmUsageSums => ({
  requests: Number(row.requests),
  input_tokens: Number(row.input_tokens),
  output_tokens: Number(row.output_tokens),
  errors: Number(row.errors),
  unmetered_requests: Number(row.unmetered_requests),
});

/** Token usage counted by the gateway, read back per sandbox, per model and per day. */
export class LlmUsage {
  constructor(private readonly input: { repo: LlmRepository; clock: Clock }) {}

  /** GET /llm/usage: totals, per sandbox and per model, over whole UTC days. */
  async report(query: UsageQuery) {
    const range = this.range(query);
    const [totals, bySandbox, byModel] = await Promise.all([this.input.repo.totals(range), this.input.repo.bySandbox(range), this.input.repo.byModel(range)]);
    return {
      since: range.since,
      until: range.until,
      totals: sums(totals),
      by_sandbox: bySandbox.map((row) => ({ sandbox: row.sandbox, ...sums(row) })),
      by_model: byModel.map((row) => ({ provider: row.provider, model: row.model, ...sums(row) })),
    };
  }

  /** GET /llm/usage/{sandbox}: one sandbox's usage of all time; NOT_FOUND for a name the gateway never saw. */
  async sandbox(name: string) {
    if (!(await this.input.repo.seen(name))) throw notFound(`no LLM usage of a sandbox named '${name}'`);
    const range: LlmUsageRange = { since: '0000-01-01', until: '9999-12-31', sandbox: name };
    const [totals, byModel, byDay] = await Promise.all([this.input.repo.totals(range), this.input.repo.byModel(range), this.input.repo.byDay(range)]);
    return {
      sandbox: name,
      totals: sums(totals),
      by_model: byModel.map((row) => ({ provider: row.provider, model: row.model, ...sums(row) })),
      by_day: byDay.map((row) => ({ day: row.day, ...sums(row) })),
    };
  }

  private range(query: UsageQuery): LlmUsageRange {
    const until = query.until !== undefined ? dayOf(query.until, 'until') : this.input.clock().toISOString().slice(0, 10);
    const since = query.since !== undefined ? dayOf(query.since, 'since') : new Date(Date.parse(until) - (DEFAULT_USAGE_DAYS - 1) * DAY_MS).toISOString().slice(0, 10);
    if (since > until) throw badRequest(`since: ${since} is after until (${until})`);
    return { since, until, ...(query.provider ? { provider: query.provider } : {}) };
  }
}

/** The UTC day of a date (YYYY-MM-DD) or an RFC 3339 timestamp; BAD_REQUEST naming `field` otherwise. */
function dayOf(value: string, field: string): string {
  const time = DATE.test(value) ? Date.parse(`${value}T00:00:00Z`) : Date.parse(value);
  if (Number.isNaN(time) || !/^\d{4}-\d{2}-\d{2}/.test(value)) throw badRequest(`${field}: '${value}' is not a date (YYYY-MM-DD) or an RFC 3339 timestamp`);
  return new Date(time).toISOString().slice(0, 10);
}
