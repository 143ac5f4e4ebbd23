/**
 * Durable building blocks that the durable platform's subsystems share: the one timers driver
 * that every source of work due at a time (schedule firings, object alarms, orchestration
 * timers, retry back-offs) registers with. The sources keep their due times in the store.
 */
export type { ObjectCaller, ObjectCallInput, ObjectCallSource } from './object-caller.js';
export { NO_ORCHESTRATIONS, type OrchestrationStarter } from './orchestration-starter.js';
export { DurableTimers, FIRST_RETRY_MS, MAX_WAIT_MS, type DurableTimersInput, type TimerSource, type Wake } from './durable-timers.js';
