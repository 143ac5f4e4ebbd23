import { z } from 'zod';
import { ServiceError } from '../../../errors.js';
import { METHOD_PATTERN } from '../../../schemas/object-schemas.js';

/** The buffered writes of a call, as the runner reports them. */
export interface Writes {
  put: Record<string, unknown>;
  delete: string[];
  delete_all: boolean;
}

/** A new alarm a method set (`at` RFC 3339), null when it deleted its alarm. */
export interface AlarmChange {
  at: string;
  method: string;
  args: unknown;
}

/** What the runner answered for one request. */
export type RunnerReply =
  | { ok: true; result: unknown; writes: Writes; alarm?: AlarmChange | null }
  | { ok: false; kind: 'threw' | 'method_not_found'; error: { name: string; message: string; stack: string }; methods?: string[] };

/** Longest a kept idempotent result may be; a larger one keeps only the fact of the call. */
export const MAX_KEPT_RESULT_BYTES = 1024 * 1024;
/** Largest storage key, in UTF-8 bytes (as Cloudflare's). */
export const MAX_KEY_BYTES = 2048;
/** How far ahead an alarm may be set. */
export const MAX_ALARM_AHEAD_MS = 366 * 86_400_000;

/**
 * The runner runs as the sandbox's user, who can change it: everything it answers is checked
 * before the host applies it.
 */
const writesSchema = z.strictObject({
  put: z.record(z.string(), z.unknown()),
  delete: z.array(z.string()),
  delete_all: z.boolean(),
});
const alarmChangeSchema = z.strictObject({ at: z.string(), method: z.string().regex(METHOD_PATTERN), args: z.unknown() }).nullable();
const replySchema = z.discriminatedUnion('ok', [
  z.object({ ok: z.literal(true), result: z.unknown(), writes: writesSchema, alarm: alarmChangeSchema.optional() }),
  z.object({
    ok: z.literal(false),
    kind: z.enum(['threw', 'method_not_found']),
    error: z.object({ name: z.string(), message: z.string(), stack: z.string() }),
    methods: z.array(z.string()).optional(),
  }),
]);

/** The runner's reply when it has the shape of one; METHOD_FAILED otherwise. */
export function checkedReply(reply: unknown): RunnerReply {
  const parsed = replySchema.safeParse(reply);
  if (!parsed.success) throw new ServiceError('METHOD_FAILED', 'the runner answered a malformed reply', { details: { reason: 'garbage', stderr: '' } });
  return parsed.data as RunnerReply;
}

/**
 * The storage after a call's writes: everything deleted first when `delete_all`, then the
 * deleted keys, then the puts. Keys are set as own properties (a key `__proto__` is data).
 */
export function applyWrites(storage: Record<string, unknown>, writes: { put: Record<string, unknown>; delete: string[]; delete_all: boolean }): Record<string, unknown> {
  const next: Record<string, unknown> = writes.delete_all ? {} : { ...storage };
  for (const key of writes.delete) delete next[key];
  for (const [key, value] of Object.entries(writes.put)) {
    if (Buffer.byteLength(key) > MAX_KEY_BYTES) throw new ServiceError('BAD_REQUEST', `storage key longer than ${MAX_KEY_BYTES} bytes`);
    Object.defineProperty(next, key, { value, enumerable: true, writable: true, configurable: true });
  }
  return next;
}

/** Whether the writes change anything. */
export function writesSomething(writes: { put: Record<string, unknown>; delete: string[]; delete_all: boolean }): boolean {
  return writes.delete_all || writes.delete.length > 0 || Object.keys(writes.put).length > 0;
}

/** Bytes of a storage as stored (JSON). */
export function storageBytes(storage: Record<string, unknown>): number {
  return Buffer.byteLength(JSON.stringify(storage));
}

/** An alarm time from `at` or `in_seconds`; 400 naming the field past a year ahead or unparsable. */
export function alarmTime(input: { at?: string | undefined; in_seconds?: number | undefined }, now: Date, field = 'at'): string {
  const at = input.at !== undefined ? new Date(input.at) : new Date(now.getTime() + (input.in_seconds ?? 0) * 1000);
  if (Number.isNaN(at.getTime())) throw new ServiceError('BAD_REQUEST', `${field}: must be an RFC 3339 time`);
  if (at.getTime() - now.getTime() > MAX_ALARM_AHEAD_MS) throw new ServiceError('BAD_REQUEST', `${field}: must be at most a year ahead`);
  return at.toISOString();
}

/** Text cut to its last `max` characters. */
export const tail = (text: string, max: number): string => (text.length > max ? text.slice(-max) : text);
