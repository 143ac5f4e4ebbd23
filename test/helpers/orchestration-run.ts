/** Steps one instance through decide() by hand, for table tests of the interpreter. */
import { decide, validateDefinition, type DecideInput, type Decision, type HistoryEvent } from '../../src/services/durable/orchestrations/interpreter/index.js';
import { META, START } from './orchestration-sim.js';

export const at = (ms: number) => new Date(START + ms).toISOString();

export class Run {
  readonly history: HistoryEvent[] = [];
  readonly definition;
  /** Virtual milliseconds after START. */
  clock = 0;

  constructor(raw: unknown) {
    this.definition = validateDefinition(raw);
  }

  /** One decision at `clock + advance`; its events join the history. */
  decide(inputs: DecideInput[], advance = 1000): Decision {
    this.clock += advance;
    const decision = decide(this.definition, this.history, { instance: META, now: at(this.clock), inputs });
    this.history.push(...decision.newEvents);
    return decision;
  }

  start(input: unknown = {}): Decision {
    return this.decide([{ type: 'start', input: input as never }], 0);
  }

  /** Starts and completes the open attempt of `step` with stdout. */
  complete(step: string, stdout: string, attempt = 1): Decision {
    return this.decide([{ type: 'activity_completed', step, attempt, duration_ms: 5, stdout, stderr: '', exit_code: 0 }]);
  }

  fail(step: string, error: string, attempt = 1): Decision {
    return this.decide([{ type: 'activity_failed', step, attempt, error }]);
  }

  types(decision: Decision): string[] {
    return decision.newEvents.map((event) => `${event.type}${event.step ? `:${event.step}` : ''}`);
  }
}
