import { createHash } from 'node:crypto';
import { v7 as uuidv7 } from 'uuid';
import { badRequest, conflict, isServiceError, notFound, ServiceError, type ErrorCode } from '../../../errors.js';
import { objectView, type AlarmReply, type SetAlarmInput, type CallLogEntry, type CreateObjectInput, type ListObjectsQuery, type ObjectView, type PatchObjectInput } from '../../../schemas/object-schemas.js';
import { view } from '../../../schemas/view.js';
import type { ObjectCallOutcome, ObjectClassRecord, ObjectRecord, ObjectRepository } from '../../../state/object-repository.js';
import { IDEMPOTENCY_TTL_MS } from '../../../state/object-repository.js';
import type { Metrics } from '../../../telemetry/metrics.js';
import type { Logger } from '../../../telemetry/logger.js';
import type { ServiceContext } from '../../context.js';
import type { EventBus } from '../../events/event-bus.js';
import { ConcurrencyLimit } from '../../support/concurrency-limit.js';
import { isoNow, KeyedMutex, type Clock } from '../../support/index.js';
import type { ObjectCaller, ObjectCallInput } from '../object-caller.js';
import { alarmTime, applyWrites, MAX_KEPT_RESULT_BYTES, storageBytes, tail, writesSomething } from './call-outcome.js';
import type { ObjectClasses } from './object-classes.js';
import { OBJECT_UID_BASE, ObjectRuntime, type CallIdentity, type Invoked, type Prepared } from './object-runtime.js';

/** Calls that may wait for one object; past it a call is refused with BUSY. */
export const MAX_QUEUED_CALLS = 64;
const STACK_BYTES = 4096;
const LOG_BYTES = 16_384;

/** What a call answered, for the HTTP face (headers) and for callers inside the server. */
export interface CallOutcome {
  result: unknown;
  object_id: string;
  duration_ms: number;
  cold_start: boolean;
  logs: string;
  /** The result came from an earlier call with the same Idempotency-Key; nothing ran. */
  replay: boolean;
}

/** A call as the service runs it: an ObjectCallInput, plus the alarm it fires, if any. */
export interface CallRequest extends ObjectCallInput {
  /** The `alarm_at` of the alarm this call fires: cleared with the call's commit. */
  fired_alarm_at?: string;
}

export interface ObjectServiceInput extends Pick<ServiceContext, 'backend' | 'sandboxes' | 'exec' | 'logger' | 'clock' | 'bus' | 'timers'> {
  repo: ObjectRepository;
  classes: ObjectClasses;
  metrics: Metrics;
  /** Object calls running at once over all objects. */
  concurrency: number;
}

/**
 * Durable objects: addressable by (class, object_id), with JSON storage on the host that each
 * call changes atomically, methods that run inside the object's own sandbox (or a bound one),
 * one call at a time per object in arrival order, and idempotency keys.
 */
export class ObjectService implements ObjectCaller {
  readonly runtime: ObjectRuntime;
  private readonly repo: ObjectRepository;
  private readonly classes: ObjectClasses;
  private readonly sandboxes: ServiceContext['sandboxes'];
  private readonly clock: Clock;
  private readonly bus: EventBus;
  private readonly timers: ServiceContext['timers'];
  private readonly logger: Logger;
  private readonly metrics: Metrics;
  private readonly locks = new KeyedMutex();
  private readonly slots: ConcurrencyLimit;
  /** Calls waiting for or running on each object (by id). */
  private readonly pending = new Map<string, number>();
  private closing = false;

  constructor(input: ObjectServiceInput) {
    this.repo = input.repo;
    this.classes = input.classes;
    this.sandboxes = input.sandboxes;
    this.clock = input.clock;
    this.bus = input.bus;
    this.timers = input.timers;
    this.logger = input.logger;
    this.metrics = input.metrics;
    this.slots = new ConcurrencyLimit(input.concurrency);
    this.runtime = new ObjectRuntime(input);
  }

  // --- objects -----------------------------------------------------------------------------

  /** POST /objects: a new object, hibernating until its first call (active when bound to a running sandbox). */
  async create(input: CreateObjectInput): Promise<ObjectView> {
    const klass = await this.repo.getClass(input.class);
    let status: ObjectRecord['status'] = 'hibernating';
    if (input.sandbox) {
      const sandbox = await this.sandboxes.require(input.sandbox);
      if (sandbox.status === 'running') status = 'active';
    }
    const storage = input.storage ?? {};
    this.checkSize(storage, klass?.max_storage_bytes, `${input.class}/${input.object_id}`);
    const record = this.newRecord(input.class, input.object_id, {
      status,
      storage,
      ...(input.sandbox ? { sandbox: input.sandbox } : {}),
      idle_timeout_seconds: input.idle_timeout_seconds ?? klass?.idle_timeout_seconds ?? 300,
    });
    if (!(await this.repo.insert(record))) throw conflict(`object '${input.class}/${input.object_id}' already exists`);
    this.publish('object.created', record, {});
    return this.viewOf(record);
  }

  async list(query: ListObjectsQuery): Promise<ObjectView[]> {
    return (await this.repo.list(query)).map((record) => this.viewOf(record));
  }

  async get(id: string): Promise<ObjectView> {
    return this.viewOf(await this.require(id));
  }

  async getByName(className: string, objectId: string): Promise<ObjectView> {
    return this.viewOf(await this.requireByName(className, objectId));
  }

  /** PATCH /objects/{id}: replaces the storage and/or wakes or hibernates the object now. */
  async patch(id: string, patch: PatchObjectInput): Promise<ObjectView> {
    const found = await this.require(id);
    return this.locks.run(found.id, async () => {
      let record = await this.require(id);
      const now = isoNow(this.clock);
      if (patch.storage) {
        const klass = await this.repo.getClass(record.class);
        const bytes = this.checkSize(patch.storage, klass?.max_storage_bytes, nameOf(record));
        await this.repo.replaceStorage(record.id, patch.storage, bytes, now);
      }
      if (patch.status === 'active' && record.status !== 'active') {
        const klass = await this.classes.require(record.class);
        await this.wake(record, klass);
      } else if (patch.status === 'hibernating' && record.status !== 'hibernating') {
        await this.hibernate(record);
      }
      record = await this.require(id);
      return this.viewOf(record);
    });
  }

  /** DELETE /objects/{id}: the object, its storage, alarm and call log, and its managed sandbox. */
  async delete(id: string): Promise<string> {
    const found = await this.require(id);
    return this.locks.run(found.id, async () => {
      const record = await this.require(id);
      if (record.sandbox_managed) await this.removeSandbox(record.sandbox);
      else await this.retireWorkers(record);
      await this.repo.delete(record.id);
      this.publish('object.deleted', record, { status: 'deleted' });
      void this.timers.poke();
      return `object '${nameOf(record)}' deleted`;
    });
  }

  /** The object's latest calls, newest first. */
  async calls(className: string, objectId: string, limit: number): Promise<CallLogEntry[]> {
    const record = await this.requireByName(className, objectId);
    return (await this.repo.calls(record.id, limit)).map((call) => ({
      call_id: call.call_id,
      method: call.method,
      source: call.source as CallLogEntry['source'],
      started_at: call.started_at,
      duration_ms: call.duration_ms,
      outcome: call.outcome,
      ...(call.error ? { error: call.error } : {}),
      cold_start: call.cold_start === 1,
      ...(call.idempotency_key ? { idempotency_key: call.idempotency_key } : {}),
    }));
  }

  async require(id: string): Promise<ObjectRecord> {
    const record = await this.repo.byId(id);
    if (!record) throw notFound(`object '${id}' not found`);
    return record;
  }

  async requireByName(className: string, objectId: string): Promise<ObjectRecord> {
    const record = await this.repo.byName(className, objectId);
    if (!record) throw notFound(`object '${className}/${objectId}' not found`);
    return record;
  }

  /** The object, made (hibernating, with a managed sandbox) when it does not exist yet. */
  async getOrCreate(className: string, objectId: string, klass?: ObjectClassRecord): Promise<ObjectRecord> {
    const existing = await this.repo.byName(className, objectId);
    if (existing) return existing;
    const record = this.newRecord(className, objectId, { status: 'hibernating', storage: {}, idle_timeout_seconds: klass?.idle_timeout_seconds ?? 300 });
    if (await this.repo.insert(record)) {
      this.publish('object.created', record, {});
      return record;
    }
    return this.requireByName(className, objectId);
  }

  // --- alarms ------------------------------------------------------------------------------

  /** GET .../alarm: the object's alarm, null when it has none. */
  async alarm(className: string, objectId: string): Promise<AlarmReply> {
    return alarmReplyOf(await this.requireByName(className, objectId), this);
  }

  /**
   * POST .../alarm: no body or `{}` runs the method `alarm` now (its result is the answer);
   * otherwise the body sets the alarm (see `setAlarm`).
   */
  async alarmRequest(className: string, objectId: string, body: SetAlarmInput | undefined): Promise<unknown> {
    if (!body || Object.keys(body).length === 0) return (await this.call({ class: className, object_id: objectId, method: 'alarm', args: {}, source: 'http' })).result;
    return this.setAlarm(className, objectId, body);
  }

  /**
   * Sets (replaces) the object's one alarm, making the object if needed without waking it. A
   * time in the past fires at once; more than a year ahead is 400.
   */
  async setAlarm(className: string, objectId: string, input: SetAlarmInput): Promise<AlarmReply> {
    if (input.at === undefined && input.in_seconds === undefined) throw badRequest('at: give at or in_seconds to set the alarm (send no body to run the alarm method now)');
    const at = alarmTime(input, this.clock(), input.at !== undefined ? 'at' : 'in_seconds');
    const klass = await this.repo.getClass(className);
    const found = await this.getOrCreate(className, objectId, klass);
    return this.locks.run(found.id, async () => {
      await this.repo.setAlarm(found.id, { at, method: input.method ?? 'alarm', args: input.args ?? {} }, isoNow(this.clock));
      void this.timers.poke();
      return alarmReplyOf(await this.require(found.id), this);
    });
  }

  /** DELETE .../alarm. */
  async deleteAlarm(className: string, objectId: string): Promise<AlarmReply> {
    const found = await this.requireByName(className, objectId);
    return this.locks.run(found.id, async () => {
      await this.repo.setAlarm(found.id, null, isoNow(this.clock));
      void this.timers.poke();
      return alarmReplyOf(await this.require(found.id), this);
    });
  }

  // --- calls -------------------------------------------------------------------------------

  async requireClass(name: string): Promise<void> {
    await this.classes.require(name);
  }

  /** ObjectCaller: a call's result, for schedules, alarms and orchestrations. */
  async callObject(input: ObjectCallInput): Promise<unknown> {
    return (await this.call(input)).result;
  }

  /**
   * Calls a method: auto-creates the object, waits for the calls before it (FIFO per object),
   * wakes it, runs the method in its sandbox and commits storage, alarm, call record and
   * idempotency result in one transaction. A throw, a timeout or a failed worker commits nothing.
   */
  async call(request: CallRequest): Promise<CallOutcome> {
    if (this.closing) throw new ServiceError('BACKEND_UNAVAILABLE', 'the server is shutting down: call again once it is back');
    const klass = await this.classes.require(request.class);
    if (request.timeout_ms !== undefined && request.timeout_ms > klass.timeout_ms) {
      throw badRequest(`timeout_ms: must be at most the class's timeout_ms (${klass.timeout_ms})`);
    }
    if (klass.methods && !klass.methods.includes(request.method)) throw methodNotFound(request, klass.methods);
    request = { ...request, timeout_ms: request.timeout_ms ?? klass.timeout_ms };
    const object = await this.getOrCreate(request.class, request.object_id, klass);
    const waiting = this.pending.get(object.id) ?? 0;
    if (waiting >= MAX_QUEUED_CALLS) throw new ServiceError('BUSY', `object '${nameOf(object)}' has ${waiting} calls waiting: retry shortly`);
    this.pending.set(object.id, waiting + 1);
    try {
      return await this.locks.run(object.id, async () => {
        const release = await this.slots.acquire();
        try {
          return await this.callLocked(request, object.id);
        } finally {
          release();
        }
      });
    } finally {
      const left = (this.pending.get(object.id) ?? 1) - 1;
      if (left > 0) this.pending.set(object.id, left);
      else this.pending.delete(object.id);
    }
  }

  /** Whether calls are waiting for or running on an object. */
  busy(id: string): boolean {
    return this.pending.has(id);
  }

  /** How many calls are waiting for or running on an object. */
  queued(id: string): number {
    return this.pending.get(id) ?? 0;
  }

  private async callLocked(request: CallRequest, id: string): Promise<CallOutcome> {
    const object = await this.require(id);
    if (request.idempotency_key) {
      const since = new Date(this.clock().getTime() - IDEMPOTENCY_TTL_MS).toISOString();
      const kept = await this.repo.idempotent(object.id, request.idempotency_key, since);
      if (kept && kept.request_hash !== null && kept.request_hash !== requestHash(request)) {
        throw new ServiceError(
          'IDEMPOTENCY_KEY_REUSED',
          `Idempotency-Key '${request.idempotency_key}' was used for another call of '${nameOf(object)}' (another method or arguments): send a new key for a new call`,
        );
      }
      if (kept) {
        if (kept.result === null) throw conflict(`this Idempotency-Key was already applied to '${nameOf(object)}'; its result was not kept (over 1 MiB)`);
        return { result: JSON.parse(kept.result), object_id: object.id, duration_ms: 0, cold_start: false, logs: '', replay: true };
      }
    }
    // The class may have changed while this call waited.
    let klass = await this.classes.require(request.class);
    const startedAt = isoNow(this.clock);
    const started = performance.now();
    const call_id = uuidv7();
    let cold = false;
    const record = (outcome: ObjectCallOutcome, error: string | null) => ({
      call_id,
      object: object.id,
      method: request.method,
      source: request.source,
      started_at: startedAt,
      duration_ms: Math.round(performance.now() - started),
      outcome,
      error,
      cold_start: cold ? 1 : 0,
      idempotency_key: request.idempotency_key ?? null,
    });
    let invoked: Invoked;
    try {
      const prepared = await this.wake(object, klass);
      cold = prepared.woke_ms !== undefined;
      const identity = await this.identityOf(object);
      klass = await this.describe(object, klass, prepared, identity);
      if (klass.methods && !klass.methods.includes(request.method)) throw methodNotFound(request, klass.methods);
      invoked = await this.runtime.invoke(
        prepared,
        klass,
        {
          method: request.method,
          args: request.args ?? {},
          storage: object.storage,
          alarm: object.alarm_at ? { fire_at: object.alarm_at, method: object.alarm_method ?? 'alarm', args: object.alarm_args ?? {} } : null,
          object: { id: object.id, class: object.class, object_id: object.object_id },
          now: startedAt,
          call_id,
        },
        request.timeout_ms ?? klass.timeout_ms,
        identity,
      );
      cold ||= invoked.worker_started;
    } catch (err) {
      throw await this.failed(request, object, err, record);
    }
    const reply = invoked.reply;
    if (!reply.ok) {
      if (reply.kind === 'method_not_found') throw methodNotFound(request, reply.methods ?? []);
      await this.repo.recordFailedCall(record('threw', `${reply.error.name}: ${reply.error.message}`), isoNow(this.clock));
      this.count('threw', started, cold);
      throw new ServiceError('METHOD_FAILED', `${nameOf(object)}.${request.method} threw ${reply.error.name}: ${reply.error.message}`, {
        details: { name: reply.error.name, message: reply.error.message, stack: tail(reply.error.stack, STACK_BYTES), logs: tail(invoked.logs, LOG_BYTES) },
      });
    }
    try {
      await this.commit(request, object, klass, reply, record('ok', null));
    } catch (err) {
      throw await this.failed(request, object, err, record);
    }
    this.count('ok', started, cold);
    return { result: reply.result, object_id: object.id, duration_ms: Math.round(performance.now() - started), cold_start: cold, logs: tail(invoked.logs, LOG_BYTES), replay: false };
  }

  /** Applies a successful call: storage (checked against the limit), alarm, record, idempotency. */
  private async commit(
    request: CallRequest,
    object: ObjectRecord,
    klass: ObjectClassRecord,
    reply: Extract<Invoked['reply'], { ok: true }>,
    call: Parameters<ObjectRepository['commit']>[0]['call'],
  ): Promise<void> {
    let storage: { value: Record<string, unknown>; bytes: number } | undefined;
    if (writesSomething(reply.writes)) {
      const value = applyWrites(object.storage, reply.writes);
      storage = { value, bytes: this.checkSize(value, klass.max_storage_bytes, nameOf(object)) };
    }
    let alarm = reply.alarm;
    if (alarm) {
      const at = new Date(alarm.at);
      if (Number.isNaN(at.getTime())) throw new ServiceError('METHOD_FAILED', `${nameOf(object)}.${request.method} set an alarm at an invalid time`);
      alarm = { ...alarm, at: at.toISOString() };
    }
    let idempotency: { key: string; result: string | null; request_hash: string } | undefined;
    if (request.idempotency_key) {
      const text = JSON.stringify(reply.result ?? null);
      idempotency = { key: request.idempotency_key, result: Buffer.byteLength(text) <= MAX_KEPT_RESULT_BYTES ? text : null, request_hash: requestHash(request) };
    }
    await this.repo.commit({
      object: object.id,
      now: isoNow(this.clock),
      ...(storage ? { storage } : {}),
      ...(alarm !== undefined ? { alarm } : {}),
      ...(request.fired_alarm_at ? { fired_alarm_at: request.fired_alarm_at } : {}),
      call,
      ...(idempotency ? { idempotency } : {}),
    });
    if (alarm !== undefined) void this.timers.poke();
  }

  /** Records a failed call and turns its error into the object's words. */
  private async failed(request: CallRequest, object: ObjectRecord, err: unknown, record: (outcome: ObjectCallOutcome, error: string | null) => Parameters<ObjectRepository['commit']>[0]['call']): Promise<unknown> {
    if (!isServiceError(err) || err.code === 'NOT_FOUND' || err.code === 'LIMIT_REACHED' || err.code === 'CONFLICT' || err.code === 'BACKEND_UNAVAILABLE') return err;
    const outcome: ObjectCallOutcome = err.code === 'TIMEOUT' ? 'timeout' : 'error';
    const call = record(outcome, err.message);
    await this.repo.recordFailedCall(call, isoNow(this.clock)).catch(() => undefined);
    this.count(outcome, performance.now() - call.duration_ms, call.cold_start === 1);
    const where = `${nameOf(object)}.${request.method}`;
    const code: ErrorCode = err.code;
    if (code === 'TIMEOUT') return new ServiceError('TIMEOUT', `${where} did not finish within ${request.timeout_ms} ms: its processes were killed and nothing was written`, { ...(err.details ? { details: err.details } : {}) });
    if (code === 'METHOD_FAILED') return new ServiceError('METHOD_FAILED', `${where} failed: ${err.message}; nothing was written`, { ...(err.details ? { details: err.details } : {}) });
    return err;
  }

  // --- wake and hibernate --------------------------------------------------------------------

  /** Makes the object's sandbox ready; a hibernating object becomes active (`object.woken`). */
  private async wake(object: ObjectRecord, klass: ObjectClassRecord): Promise<Prepared> {
    const prepared = await this.runtime.prepare(object, klass);
    if (object.status !== 'active') {
      await this.repo.setStatus(object.id, 'active', isoNow(this.clock));
      object.status = 'active';
      this.publish('object.woken', object, { cold_start_ms: prepared.woke_ms ?? 0 });
      void this.timers.poke();
    }
    return prepared;
  }

  /** Stops a managed sandbox (a bound one is left alone) and marks the object hibernating. */
  async hibernate(object: ObjectRecord): Promise<void> {
    if (object.sandbox_managed) {
      try {
        const sandbox = await this.sandboxes.require(object.sandbox);
        if (sandbox.backend_id) this.runtime.forget(sandbox.backend_id);
        if (sandbox.status === 'running') await this.sandboxes.stop(object.sandbox);
      } catch (err) {
        if (!(isServiceError(err) && err.code === 'NOT_FOUND')) throw err;
      }
    }
    await this.repo.setStatus(object.id, 'hibernating', isoNow(this.clock));
    this.publish('object.hibernated', object, {});
  }

  /** Hibernates an idle object unless a call came meanwhile (runs under the object's lock). */
  async hibernateIdle(id: string, idleSince: (record: ObjectRecord) => number, now: Date): Promise<void> {
    await this.locks.run(id, async () => {
      const record = await this.repo.byId(id);
      if (!record || record.status !== 'active') return;
      if (idleSince(record) + record.idle_timeout_seconds * 1000 > now.getTime()) return;
      await this.hibernate(record);
    });
  }

  /** At start: active objects whose sandbox no longer runs are hibernating (no events). */
  async recover(): Promise<void> {
    for (const record of await this.repo.active()) {
      const sandbox = await this.sandboxes.require(record.sandbox).catch(() => undefined);
      if (sandbox?.status !== 'running') await this.repo.setStatus(record.id, 'hibernating', isoNow(this.clock));
    }
  }

  /** New calls are refused from now on (503); calls under way finish. */
  close(): void {
    this.closing = true;
  }

  /** Who the object's calls run as: in a sandbox it is bound to (shared), a uid of its own. */
  private async identityOf(object: ObjectRecord): Promise<CallIdentity> {
    if (object.sandbox_managed) return { object: object.id, uid: null };
    const row = await this.repo.rowNumber(object.id);
    if (row === undefined) throw notFound(`object '${nameOf(object)}' not found`);
    return { object: object.id, uid: OBJECT_UID_BASE + row };
  }

  /** Stops a deleted bound object's workers, so that no process of its uid outlives it. */
  private async retireWorkers(object: ObjectRecord): Promise<void> {
    const sandbox = await this.sandboxes.require(object.sandbox).catch(() => undefined);
    if (sandbox?.backend_id && sandbox.status === 'running') await this.runtime.retire(sandbox.backend_id, object.id);
  }

  /** The first call of a class version in a sandbox learns the module's methods. */
  private async describe(object: ObjectRecord, klass: ObjectClassRecord, prepared: Prepared, identity: CallIdentity): Promise<ObjectClassRecord> {
    if (klass.methods) return klass;
    const described = await this.runtime.invoke(
      prepared,
      klass,
      { method: '__describe', args: {}, storage: {}, alarm: null, object: { id: object.id, class: object.class, object_id: object.object_id }, now: isoNow(this.clock), call_id: '' },
      klass.timeout_ms,
      identity,
    );
    if (!described.reply.ok) {
      const { error } = described.reply;
      throw new ServiceError('METHOD_FAILED', `class '${klass.name}' v${klass.version} could not be loaded: ${error.name}: ${error.message}`, {
        details: { name: error.name, message: error.message, stack: tail(error.stack, STACK_BYTES), logs: tail(described.logs, LOG_BYTES) },
      });
    }
    const methods = Array.isArray(described.reply.result) ? described.reply.result.filter((name): name is string => typeof name === 'string') : [];
    await this.repo.setMethods(klass.name, klass.version, methods);
    return { ...klass, methods };
  }

  // --- helpers -------------------------------------------------------------------------------

  private newRecord(className: string, objectId: string, fields: Pick<ObjectRecord, 'status' | 'storage' | 'idle_timeout_seconds'> & { sandbox?: string }): ObjectRecord {
    const id = uuidv7();
    const now = isoNow(this.clock);
    return {
      id,
      class: className,
      object_id: objectId,
      status: fields.status,
      sandbox: fields.sandbox ?? `obj-${id.replaceAll('-', '')}`,
      sandbox_managed: fields.sandbox ? 0 : 1,
      storage: fields.storage,
      storage_bytes: storageBytes(fields.storage),
      idle_timeout_seconds: fields.idle_timeout_seconds,
      alarm_at: null,
      alarm_method: null,
      alarm_args: null,
      alarm_attempts: 0,
      alarm_retry_at: null,
      last_alarm_error: null,
      last_call_at: null,
      call_count: 0,
      created_at: now,
      updated_at: now,
      uid_number: null,
    };
  }

  /** The storage's size; 413 when it is over the class's limit (or the server default). */
  private checkSize(storage: Record<string, unknown>, limit: number | undefined, name: string): number {
    const bytes = storageBytes(storage);
    const max = limit ?? this.classes.defaultMaxStorageBytes;
    if (bytes > max) throw new ServiceError('PAYLOAD_TOO_LARGE', `storage of '${name}' would be ${bytes} bytes, over its limit of ${max}: nothing was written`);
    return bytes;
  }

  private async removeSandbox(name: string): Promise<void> {
    try {
      const sandbox = await this.sandboxes.require(name);
      if (sandbox.backend_id) this.runtime.forget(sandbox.backend_id);
      await this.sandboxes.remove(name);
    } catch (err) {
      if (!(isServiceError(err) && err.code === 'NOT_FOUND')) throw err;
    }
  }

  private count(outcome: ObjectCallOutcome, started: number, cold: boolean): void {
    this.metrics.objectCalls.inc({ outcome });
    this.metrics.objectCallDuration.observe({ cold: String(cold) }, (performance.now() - started) / 1000);
  }

  /** Publishes an event about an object. */
  publish(type: 'object.created' | 'object.woken' | 'object.hibernated' | 'object.deleted' | 'object.alarm.failed', object: ObjectRecord, metadata: Record<string, unknown>): void {
    this.bus.publish({
      type,
      timestamp: isoNow(this.clock),
      sandbox: '',
      sandbox_uuid: '',
      resource: { kind: 'object', id: object.id, name: nameOf(object) },
      labels: {},
      metadata: { class: object.class, object_id: object.object_id, ...metadata },
    });
  }

  viewOf(record: ObjectRecord): ObjectView {
    return view(objectView, {
      ...record,
      sandbox_managed: record.sandbox_managed === 1,
      alarm: record.alarm_at ? { fire_at: record.alarm_at, method: record.alarm_method ?? 'alarm', args: record.alarm_args ?? {}, attempts: record.alarm_attempts } : null,
    });
  }
}

function alarmReplyOf(record: ObjectRecord, service: ObjectService): AlarmReply {
  return { class: record.class, object_id: record.object_id, alarm: service.viewOf(record).alarm };
}

/** `class/object_id`. */
export const nameOf = (object: Pick<ObjectRecord, 'class' | 'object_id'>): string => `${object.class}/${object.object_id}`;

/** What an Idempotency-Key stands for: the method and its arguments (JSON, keys in order), hashed. */
function requestHash(request: Pick<ObjectCallInput, 'method' | 'args'>): string {
  return createHash('sha256').update(JSON.stringify([request.method, canonical(request.args ?? {})])).digest('hex');
}

/** A JSON value with its object keys sorted (arguments nest at most as deep as a request body may). */
function canonical(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value ?? null), (_key, inner: unknown) =>
    inner !== null && typeof inner === 'object' && !Array.isArray(inner) ? Object.fromEntries(Object.entries(inner).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : inner,
  );
}

function methodNotFound(request: ObjectCallInput, methods: string[]): ServiceError {
  return notFound(`method '${request.method}' not found on class '${request.class}' (methods: ${methods.join(', ') || 'none'})`);
}
