import { randomBytes } from 'node:crypto';
import { v7 as uuidv7 } from 'uuid';
import { ServiceError } from '../../../../../errors.js';
import { integerArg, parseOptions, serialise, stringArg, type CommandSpec } from '../embedded/command-args.js';
import type { MessageRow, QueueTable } from './queue-table.js';

/**
 * The queue commands, with SQS's semantics: at-least-once delivery, a visibility timeout per
 * delivery, receipts that only the latest delivery's holder has, dead letters after
 * `max_attempts` deliveries. Each command runs inside one SQLite transaction opened by the
 * handle; DEQUEUE's waiting (WAIT) is the handle's, around `deliver`.
 */

/** A queue store's settings, as `checkConfig` returns them. */
export interface QueueConfig {
  visibility_timeout_seconds: number;
  max_attempts: number;
  retention_seconds: number;
  max_message_bytes: number;
  max_messages: number;
  max_bytes: number;
}

/** How long a DEDUP id keeps answering the first message's id (SQS's deduplication interval). */
const DEDUP_WINDOW_MS = 5 * 60 * 1000;
/** Longest visibility timeout and NACK delay: 12 hours, as in SQS. */
export const MAX_VISIBILITY_SECONDS = 43_200;
/** Longest ENQUEUE delay: 15 minutes, as in SQS. */
const MAX_DELAY_SECONDS = 900;
const MAX_DEDUP_BYTES = 128;
const MAX_PRIORITY = 2 ** 31 - 1;
/** Receipts are 144 random bits: opaque, and not to be guessed. */
const RECEIPT_BYTES = 18;
const MAX_RECEIPT_BYTES = 64;
/** DEQUEUE's COUNT and WAIT, PEEK's and DEAD's COUNT. */
const MAX_DEQUEUE_COUNT = 100;
const MAX_WAIT_SECONDS = 20;
const LIST_COUNT = 10;
/** Receipts one ACK takes at most: a command's statements stay bounded. */
const MAX_ACK_RECEIPTS = 1000;

interface QueueCall {
  table: QueueTable;
  args: unknown[];
  now: number;
  config: QueueConfig;
  /** The store's name, for messages. */
  store: string;
}

interface QueueCommand extends CommandSpec {
  /** A command after which waiting DEQUEUEs look again (a message may have become ready). */
  wakes?: boolean;
  /** Absent on DEQUEUE alone: the handle runs it, since it may wait (see `parseDequeue`, `deliver`). */
  run?(call: QueueCall): unknown;
}

/** A DEQUEUE's arguments. */
export interface DequeueRequest {
  count: number;
  visibilitySeconds: number;
  waitSeconds: number;
}

const receipt = (command: string, value: unknown) => stringArg(command, 'receipt', value, MAX_RECEIPT_BYTES);
const iso = (ms: number) => new Date(ms).toISOString();

/** A message as PEEK and DEAD list it. */
const listed = (row: MessageRow) => ({
  id: row.id,
  body: JSON.parse(row.body) as unknown,
  attempts: row.attempts,
  priority: row.priority,
  enqueued_at: iso(row.enqueued_at),
});

const countOption = (command: string, args: unknown[]): number => {
  const options = parseOptions(command, args, { COUNT: true });
  return options.has('COUNT') ? integerArg(command, 'COUNT', options.get('COUNT'), 1, MAX_DEQUEUE_COUNT) : LIST_COUNT;
};

/** The queue commands by upper-case name. */
export const QUEUE_COMMANDS: Record<string, QueueCommand> = {
  ENQUEUE: {
    usage: 'ENQUEUE body [DELAY seconds] [DEDUP id] [PRIORITY n]',
    min: 1,
    max: 7,
    writes: true,
    wakes: true,
    run: enqueue,
  },
  DEQUEUE: {
    usage: `DEQUEUE [COUNT n<=${MAX_DEQUEUE_COUNT}] [VISIBILITY seconds] [WAIT seconds<=${MAX_WAIT_SECONDS}]`,
    min: 0,
    max: 6,
    writes: true,
  },
  ACK: {
    usage: `ACK receipt [receipt ...] (at most ${MAX_ACK_RECEIPTS})`,
    min: 1,
    max: MAX_ACK_RECEIPTS,
    writes: true,
    run: ({ table, args }) => args.map((value) => receipt('ACK', value)).filter((value) => table.ack(value)).length,
  },
  NACK: {
    usage: 'NACK receipt [DELAY seconds]',
    min: 1,
    max: 3,
    writes: true,
    wakes: true,
    run: ({ table, args, now }) => {
      const value = receipt('NACK', args[0]);
      const options = parseOptions('NACK', args.slice(1), { DELAY: true });
      const delay = options.has('DELAY') ? integerArg('NACK', 'DELAY', options.get('DELAY'), 0, MAX_VISIBILITY_SECONDS) : 0;
      return table.nack(value, now + delay * 1000) ? 1 : 0;
    },
  },
  EXTEND: {
    usage: 'EXTEND receipt seconds',
    min: 2,
    max: 2,
    writes: true,
    run: ({ table, args, now }) => {
      const value = receipt('EXTEND', args[0]);
      const visibleAt = now + integerArg('EXTEND', 'seconds', args[1], 0, MAX_VISIBILITY_SECONDS) * 1000;
      return table.extend(value, visibleAt) ? iso(visibleAt) : null;
    },
  },
  PEEK: {
    usage: `PEEK [COUNT n<=${MAX_DEQUEUE_COUNT}]`,
    min: 0,
    max: 2,
    writes: false,
    run: ({ table, args, now, config }) => table.ready(now, config.max_attempts, countOption('PEEK', args)).map(listed),
  },
  STATS: { usage: 'STATS', min: 0, max: 0, writes: false, run: ({ table, now, config }) => table.counts(now, config.max_attempts) },
  PURGE: { usage: 'PURGE', min: 0, max: 0, writes: true, run: ({ table }) => table.purge() },
  DEAD: {
    usage: `DEAD [COUNT n<=${MAX_DEQUEUE_COUNT}]`,
    min: 0,
    max: 2,
    writes: false,
    run: ({ table, args, now, config }) => table.dead(now, config.max_attempts, countOption('DEAD', args)).map(listed),
  },
  REDRIVE: { usage: 'REDRIVE', min: 0, max: 0, writes: true, wakes: true, run: ({ table, now, config }) => table.redrive(now, config.max_attempts) },
};

function enqueue({ table, args, now, config, store }: QueueCall): { id: string } {
  const body = serialise('ENQUEUE', 'body', args[0], config.max_message_bytes);
  const options = parseOptions('ENQUEUE', args.slice(1), { DELAY: true, DEDUP: true, PRIORITY: true });
  const delay = options.has('DELAY') ? integerArg('ENQUEUE', 'DELAY', options.get('DELAY'), 0, MAX_DELAY_SECONDS) : 0;
  const priority = options.has('PRIORITY') ? integerArg('ENQUEUE', 'PRIORITY', options.get('PRIORITY'), -MAX_PRIORITY, MAX_PRIORITY) : 0;
  const dedup = options.has('DEDUP') ? stringArg('ENQUEUE', 'DEDUP', options.get('DEDUP'), MAX_DEDUP_BYTES) : undefined;
  if (dedup !== undefined) {
    const first = table.dedupFind(dedup, now);
    if (first !== undefined) return { id: first };
  }
  const usage = table.usage();
  if (usage.messages >= config.max_messages) {
    throw full(store, `it holds ${usage.messages} messages, config.max_messages is ${config.max_messages}`, 'max_messages');
  }
  const bytes = usage.bytes + Buffer.byteLength(body);
  if (bytes > config.max_bytes) {
    throw full(store, `its messages would take ${bytes} bytes, more than config.max_bytes (${config.max_bytes})`, 'max_bytes');
  }
  const id = uuidv7();
  table.insert({ id, body, priority, now, visibleAt: now + delay * 1000 });
  if (dedup !== undefined) table.dedupPut(dedup, id, now + DEDUP_WINDOW_MS);
  return { id };
}

const full = (store: string, why: string, field: string) =>
  new ServiceError('PAYLOAD_TOO_LARGE', `command: ENQUEUE: queue '${store}' is full: ${why}; acknowledge or purge messages or raise config.${field}`);

/** DEQUEUE's options, with the store's visibility timeout as the default. */
export function parseDequeue(args: unknown[], config: QueueConfig): DequeueRequest {
  const options = parseOptions('DEQUEUE', args, { COUNT: true, VISIBILITY: true, WAIT: true });
  const option = (name: string, min: number, max: number, fallback: number) =>
    options.has(name) ? integerArg('DEQUEUE', name, options.get(name), min, max) : fallback;
  return {
    count: option('COUNT', 1, MAX_DEQUEUE_COUNT, 1),
    visibilitySeconds: option('VISIBILITY', 0, MAX_VISIBILITY_SECONDS, config.visibility_timeout_seconds),
    waitSeconds: option('WAIT', 0, MAX_WAIT_SECONDS, 0),
  };
}

/** Delivers up to `count` ready messages now, each with a fresh receipt, hidden for the visibility timeout. */
export function deliver({ table, now, config }: Pick<QueueCall, 'table' | 'now' | 'config'>, request: DequeueRequest) {
  const visibleAt = now + request.visibilitySeconds * 1000;
  return table.ready(now, config.max_attempts, request.count).map((row) => {
    const value = randomBytes(RECEIPT_BYTES).toString('base64url');
    table.deliver(row.seq, value, visibleAt);
    const body = JSON.parse(row.body) as unknown;
    return { id: row.id, body, receipt: value, attempts: row.attempts + 1, enqueued_at: iso(row.enqueued_at) };
  });
}
