/**
 * Infrastructure the domain services share: clocks, durations, a per-key mutex, background
 * loops and host figures. Nothing here knows about sandboxes.
 */
export { repeatEvery } from './background-loop.js';
export { isoNow, systemClock, type Clock } from './clock.js';
export { addDuration, parseDuration } from './durations.js';
export { HostStats, type HostUsage } from './host-stats.js';
export { KeyedMutex } from './keyed-mutex.js';
export { declaredCapabilities, requireCapability } from './capabilities.js';
