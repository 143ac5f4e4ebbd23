/**
 * Infrastructure the domain services share: clocks, durations, a per-key mutex, background
 * loops, host figures, the box that encrypts secrets at rest and the removals that go on in the
 * background (departures, which see sandbox records as the state layer stores them). Nothing
 * here imports a domain.
 */
export { repeatEvery } from './background-loop.js';
export { isoNow, systemClock, type Clock } from './clock.js';
export { addDuration, parseDuration } from './durations.js';
export { HostStats, type HostUsage } from './host-stats.js';
export { Departures } from './departures.js';
export { KeyedMutex } from './keyed-mutex.js';
export { WritesInFlight } from './writes-in-flight.js';
export { declaredCapabilities, requireCapability } from './capabilities.js';
export { SecretBox, secretBoxFor, SecretKeyError, SecretOpenError, type OpenFailure, type SecretBoxInput } from './secret-box.js';
