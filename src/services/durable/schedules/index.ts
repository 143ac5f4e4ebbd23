/**
 * Schedules: cron (5 or 6 fields, nicknames, IANA zones) and one-shot firings of an object
 * method, an orchestration start, an exec in a sandbox or a /run. `ScheduleService` is the API;
 * its `firing` is the DurableTimers source that claims due schedules (a conditional UPDATE
 * committed with the run row before the target runs) and hands their targets off.
 */
export { cronCalculator, dueOccurrences, firstAfter, isTimeZone, CRON_NICKNAMES, MAX_COUNTED, MISFIRE_GRACE_MS, type CronCalculator } from './cron.js';
export { planFiring, newRun, type FiringPlan } from './firing-plan.js';
export { ScheduleFiring, type ScheduleMetrics } from './schedule-firing.js';
export { ScheduleService, parseTimestamp, type ScheduleServiceInput } from './schedule-service.js';
export { SCHEDULE_TRANSITIONS, nextStatus, requireTransition, type ScheduleTrigger } from './schedule-status.js';
export { capResult, idempotencyKey, MAX_RESULT_BYTES, targetKind, type TargetKind, type TargetPorts } from './schedule-targets.js';
