import { notFound } from '../../errors.js';

/**
 * How schedules (and later other callers) reach orchestrations: a definition check at create and
 * the start of an instance. The orchestration service implements it; a start is idempotent by
 * its key, so a schedule run cut by a crash is retried at recovery and starts one instance.
 */
export interface OrchestrationStarter {
  /** NOT_FOUND (`orchestration definition 'x' not found`) unless definition `name` exists. */
  requireDefinition(name: string): Promise<void>;
  /** Starts an instance of definition `name` with `input`; resolves with its id. */
  start(input: { definition: string; input: unknown; idempotency_key: string }): Promise<{ orchestration_id: string }>;
}

/** Until orchestrations exist (issue 15): no definition exists, so nothing can be started. */
export const NO_ORCHESTRATIONS: OrchestrationStarter = {
  async requireDefinition(name) {
    throw notFound(`orchestration definition '${name}' not found`);
  },
  async start({ definition }) {
    throw notFound(`orchestration definition '${definition}' not found`);
  },
};
