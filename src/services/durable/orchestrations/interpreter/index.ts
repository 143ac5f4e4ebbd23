/**
 * The orchestration interpreter, pure: no I/O, no clock, no randomness (docs/decisions.md,
 * "Orchestrations (interpreter)"). It imports nothing of the service around it, no repository
 * and no backend (the `orchestration-interpreter-is-pure` rule of .dependency-cruiser.cjs);
 * the service (../orchestration-service.ts) builds on these parts:
 *
 * - `validateDefinition(raw)`: the DSL checked at definition time (BAD_REQUEST naming every
 *   problem's path); `definitionHash` for versions; `isInlineForm` / `translateInline` for the
 *   agentkernel inline start.
 * - `decide(definition, history, {instance, now, inputs})`: the events to append and the
 *   commands to carry out after the commit, plus the instance status and its open work; from a
 *   `KeptState` instead of the history, the caller's derived state is advanced in place.
 * - `openWork(definition, history, instance)`: what to re-arm after a restart.
 * - `projectInstance(definition, history, instance)`: status, output, error, `steps[]`,
 *   `waiting_for` for the instance view.
 */
export * from './dsl.js';
export { decide, decideWalk, openWork, statusOf, INTERRUPTED, type Command, type Decision, type DecideInput, type DecideOptions, type InstanceStatus, type KeptState } from './decide.js';
export { replay, type InstanceState } from './state.js';
export { drain, LIMIT_FLAGS, WorkLimitError, YIELD_EVERY, type ActivityCommand, type InstanceMeta, type OpenWork, type Walk, type WorkLimits } from './drive.js';
export { canonicalJson, definitionHash } from './definition-hash.js';
export { evaluateCondition, jsonEqual } from './conditions.js';
export { ExpressionError, parsePath, parseTemplate, resolveDeep, resolveString, type ExpressionContext, type StepFacts } from './expressions.js';
export { capValue, childPath, idempotencyKey, itemPath, jsonBytes, type EventOf, type HistoryEvent, type HistoryEventData, type HistoryEventType } from './history.js';
export { isInlineForm, translateInline } from './inline-form.js';
export { leastWork, type LeastWork } from './least-work.js';
export { projectInstance, projectionWalk, stepAt, type InstanceProjection, type StepStatus, type StepView } from './instance-view.js';
export { definitionProblems, validateDefinition } from './validate.js';
