/**
 * How the other durable subsystems (schedules, alarms, orchestrations) reach durable objects:
 * the object service implements it, and callers depend on this shape only.
 */
export interface ObjectCaller {
  /** NOT_FOUND (`class 'x' is not registered: ...`) unless class `name` is registered. */
  requireClass(name: string): Promise<void>;
  /**
   * Calls `method` of object (`class`, `object_id`) as an HTTP call would: it auto-creates the
   * object and wakes it, and resolves with the method's return value. With `idempotency_key`
   * a repeat runs nothing and resolves with the first call's result, so the storage effect
   * happens once. Throws the call's ServiceError (METHOD_FAILED, TIMEOUT, NOT_FOUND, ...).
   */
  callObject(input: ObjectCallInput): Promise<unknown>;
}

/** Who made an object call; kept in the object's call log. */
export type ObjectCallSource = 'http' | 'alarm' | 'schedule' | 'orchestration' | 'mcp';

export interface ObjectCallInput {
  class: string;
  object_id: string;
  method: string;
  /** The method's arguments: any JSON value. */
  args: unknown;
  idempotency_key?: string;
  source: ObjectCallSource;
  /** At most the class's `timeout_ms`; the class's when absent. */
  timeout_ms?: number;
}
