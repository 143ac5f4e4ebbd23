/**
 * The history of an instance: the event-sourced record `decide()` replays. Event types and
 * their data are those of docs/decisions.md ("Orchestrations (interpreter)"). The step path
 * of an event is on the entry (`step`), not repeated in `data`.
 *
 * Step paths name every step of an instance, nested ones included: a top-level step is its id
 * (`list`); a step of a parallel branch is `<parallel path>.<branch>.<id>` (`checks.lint.lint`);
 * the step of a map item is `<map path>[<index>]` (`each[3]`), and what nests under it goes on
 * from there (`each[3].lint.lint`). The idempotency key of an activity is
 * `orch:<instance id>:<step path>`, the same for every attempt (a `call` repeated after a crash
 * is then run once by the object).
 */
import type { JsonValue } from './dsl.js';

export interface HistoryEventData {
  OrchestratorStarted: { input: JsonValue };
  ActivityScheduled: { attempt: number; idempotency_key: string };
  ActivityStarted: { attempt: number };
  ActivityCompleted: {
    attempt: number;
    output: JsonValue;
    exit_code: number | null;
    duration_ms: number;
    /** The last 64 KiB of stderr (run and exec); null for call. */
    stderr: string | null;
    /** Present (true) when the output was cut at 1 MiB. */
    output_truncated?: true;
  };
  ActivityFailed: { attempt: number; error: string; exit_code?: number; retry_at?: string; stderr?: string };
  TimerCreated: { fire_at: string };
  TimerFired: Record<string, never>;
  EventRaised: { name: string; data: JsonValue };
  EventConsumed: { name: string; raised_sequence: number };
  StepSkipped: Record<string, never>;
  OrchestratorCompleted: { output: JsonValue; output_truncated?: true };
  OrchestratorFailed: { error: string };
  OrchestratorTerminated: { reason: string };
}

export type HistoryEventType = keyof HistoryEventData;

/** One entry of a history. `sequence` starts at 1 and has no gaps. */
export type HistoryEvent = {
  [T in HistoryEventType]: { sequence: number; type: T; step: string | null; data: HistoryEventData[T]; timestamp: string };
}[HistoryEventType];

export type EventOf<T extends HistoryEventType> = Extract<HistoryEvent, { type: T }>;

/** The idempotency key of every attempt of the activity at `stepPath`. */
export const idempotencyKey = (instanceId: string, stepPath: string): string => `orch:${instanceId}:${stepPath}`;

/** The path of step `id` in the list at `parent` (`''` at the top). */
export const childPath = (parent: string, id: string): string => (parent ? `${parent}.${id}` : id);

/** The path of item `index` of the map at `mapPath`. */
export const itemPath = (mapPath: string, index: number): string => `${mapPath}[${index}]`;

/** Serialized size of a JSON value in bytes. */
export const jsonBytes = (value: JsonValue): number => Buffer.byteLength(JSON.stringify(value) ?? 'null');

/**
 * A value cut to at most `limit` bytes of JSON: small values as they are; larger ones become the
 * first `limit` bytes of their text (a string as it is, anything else as JSON), cut on a
 * character boundary, with `truncated: true`.
 */
export function capValue(value: JsonValue, limit: number): { value: JsonValue; truncated: boolean } {
  if (jsonBytes(value) <= limit) return { value, truncated: false };
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return { value: cutUtf8(text, limit), truncated: true };
}

/** Whether `byte` continues a UTF-8 character (10xxxxxx); false past the end. */
const isContinuation = (byte: number | undefined): boolean => byte !== undefined && (byte & 0xc0) === 0x80;

/** The first `limit` bytes of `text`, never splitting a character. */
export function cutUtf8(text: string, limit: number): string {
  const bytes = Buffer.from(text);
  if (bytes.length <= limit) return text;
  let end = limit;
  while (end > 0 && isContinuation(bytes[end])) end -= 1;
  return bytes.subarray(0, end).toString();
}

/** The last `limit` bytes of `text`, never splitting a character. */
export function tailUtf8(text: string, limit: number): string {
  const bytes = Buffer.from(text);
  if (bytes.length <= limit) return text;
  let start = bytes.length - limit;
  while (start < bytes.length && isContinuation(bytes[start])) start += 1;
  return bytes.subarray(start).toString();
}
