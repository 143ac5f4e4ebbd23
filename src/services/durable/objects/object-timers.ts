import type { ObjectRepository, ObjectRecord } from '../../../state/object-repository.js';
import type { Logger } from '../../../telemetry/logger.js';
import { isServiceError } from '../../../errors.js';
import type { Clock } from '../../support/clock.js';
import type { TimerSource } from '../durable-timers.js';
import type { ObjectService } from './object-service.js';
import { nameOf } from './object-service.js';

/** Back-off of a failed alarm: 2, 4, 8, 16, 32, 64 s, then it is given up. */
export const ALARM_RETRIES = 6;
const FIRST_ALARM_RETRY_MS = 2_000;
/** Alarms fired per tick at most; the rest are due at the next. */
const ALARMS_PER_TICK = 64;

/**
 * Fires objects' alarms when due: the alarm's method runs through the normal call path (it
 * wakes the object) with the key `alarm:<object id>:<fire_at ms>`, and the commit that applies
 * the method's writes clears the alarm, unless the method set another. A failure is retried
 * after 2, 4, ... 64 s and then given up (`last_alarm_error`, `object.alarm.failed`). Alarms
 * missed while the server was down are due at once when it starts.
 */
export class ObjectAlarms implements TimerSource {
  readonly name = 'object-alarms';
  /** Objects whose alarm is being fired. */
  private readonly firing = new Set<string>();

  constructor(
    private readonly repo: ObjectRepository,
    private readonly objects: ObjectService,
    private readonly poke: () => void,
    private readonly logger: Logger,
    private readonly clock: Clock,
  ) {}

  async nextDue(): Promise<Date | null> {
    const at = await this.repo.nextAlarm(this.firing);
    return at ? new Date(at) : null;
  }

  async tick(now: Date): Promise<void> {
    for (const object of await this.repo.dueAlarms(now.toISOString(), ALARMS_PER_TICK + this.firing.size)) {
      if (this.firing.has(object.id)) continue;
      this.firing.add(object.id);
      void this.fire(object).finally(() => {
        this.firing.delete(object.id);
        this.poke();
      });
    }
  }

  private async fire(object: ObjectRecord): Promise<void> {
    const alarmAt = object.alarm_at;
    // Only objects with an alarm are fired; one whose alarm went meanwhile has nothing to fire.
    if (alarmAt === null) return;
    try {
      await this.objects.call({
        class: object.class,
        object_id: object.object_id,
        method: object.alarm_method ?? 'alarm',
        args: object.alarm_args ?? {},
        idempotency_key: `alarm:${object.id}:${Date.parse(alarmAt)}`,
        source: 'alarm',
        fired_alarm_at: alarmAt,
      });
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      const attempts = object.alarm_attempts + 1;
      const retryAt = attempts <= ALARM_RETRIES ? new Date(this.clock().getTime() + FIRST_ALARM_RETRY_MS * 2 ** (attempts - 1)).toISOString() : null;
      await this.repo.alarmFailed(object.id, alarmAt, message, retryAt, this.clock().toISOString());
      if (!retryAt) {
        this.objects.publish('object.alarm.failed', object, { method: object.alarm_method, fire_at: alarmAt, attempts, error: message });
      }
      this.logger.warn({ object: nameOf(object), attempts, err: isServiceError(err) ? err.message : err }, retryAt ? 'alarm failed; retrying' : 'alarm failed; given up');
    }
  }
}

/**
 * Hibernates active objects idle for their `idle_timeout_seconds` (since their last call, or
 * since they were made): a managed sandbox is stopped (its files kept), a bound one left alone.
 * An object with calls waiting or running is never hibernated.
 */
export class ObjectHibernation implements TimerSource {
  readonly name = 'object-hibernation';

  constructor(
    private readonly repo: ObjectRepository,
    private readonly objects: ObjectService,
  ) {}

  async nextDue(): Promise<Date | null> {
    let earliest: number | undefined;
    for (const object of await this.repo.active()) {
      if (this.objects.busy(object.id)) continue;
      const due = idleSince(object) + object.idle_timeout_seconds * 1000;
      if (earliest === undefined || due < earliest) earliest = due;
    }
    return earliest === undefined ? null : new Date(earliest);
  }

  async tick(now: Date): Promise<void> {
    for (const object of await this.repo.active()) {
      if (this.objects.busy(object.id) || idleSince(object) + object.idle_timeout_seconds * 1000 > now.getTime()) continue;
      await this.objects.hibernateIdle(object.id, idleSince, now);
    }
  }
}

/** When an object was last used: its last call, else when it was last changed. */
function idleSince(object: ObjectRecord): number {
  return Date.parse(object.last_call_at ?? object.updated_at);
}
