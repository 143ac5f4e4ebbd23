import { describe, expect, it } from 'vitest';
import type { StoreHandle } from '../../src/services/durable/stores/store-engine.js';
import { refusal, uniqueName, type Skip, type SuiteContext } from './store-engine-conformance.js';

/** How the suite's commands are spelled on one command kind. `key` is unique to the case. */
export interface CommandDialect {
  /** Commands that change data (refused on a read-only store), and commands that only read. */
  writes(key: string): unknown[][];
  reads(key: string): unknown[][];
  /** Stores `value` under `key` and reads it back: the two argvs and how the answer holds the value. */
  roundTrip(key: string, value: unknown): { put: unknown[]; get: unknown[]; value(answer: unknown): unknown };
  /** Whether any JSON value is stored as it is (kv, queue), or only strings and `{"$base64": ...}` (redis). */
  jsonValues: boolean;
  /** The kind has no keys (queue): each case that reads back what it wrote runs on a store of its own. */
  keyless: boolean;
  /** A command that adds one to a count, and how to read the count. */
  counter(key: string): { bump: unknown[]; read: unknown[]; value(answer: unknown): number };
  /**
   * A command that is still running at a short timeout_ms: on which store (`handle`, made by
   * the subject; the shared one when absent) and what it answers then (TIMEOUT, or an empty
   * answer for a long poll that ends at the request's time limit); or why there is none.
   */
  slow: { command: unknown[]; handle?(context: SuiteContext): Promise<StoreHandle>; answers: 'TIMEOUT' | { value: unknown } } | Skip;
  /** A store that fills up: its config and a command that passes it; or why none does. */
  full: { config: Record<string, unknown>; fill: unknown[] } | Skip;
}

/** Values every command kind keeps as they were sent. */
const STRINGS = ['plain', '', `it's "quoted" \\ ü 😀 \u0001`, '9007199254740993', { $base64: 'AP8QgA==' }];
/** Values beyond strings, for the kinds that store JSON. */
const JSON_VALUES = [42, -1.5, true, null, { a: [1, 'x', { b: null }] }, [1, 2, 3]];

/** The command cases, on the suite's shared store. */
export function commandCases(context: SuiteContext, dialect: CommandDialect): void {
  const run = (command: unknown[], timeoutMs = 10_000, store: StoreHandle = context.store()) => store.command!({ command, timeoutMs });
  /** The store a case that reads back what it wrote runs on. */
  const own = async () => (dialect.keyless ? (await context.newStore()).handle : context.store());

  describe('commands', () => {
    it('says which commands write; an unknown command or argv counts as a write', () => {
      const engine = context.engine();
      const key = uniqueName('k');
      for (const command of dialect.writes(key)) expect(engine.commandWrites!(command), JSON.stringify(command)).toBe(true);
      for (const command of dialect.reads(key)) expect(engine.commandWrites!(command), JSON.stringify(command)).toBe(false);
      for (const command of [['NOSUCHCOMMAND'], [42], [], [null]]) expect(engine.commandWrites!(command), JSON.stringify(command)).toBe(true);
      // Names are case-insensitive.
      const [read] = dialect.reads(key);
      expect(engine.commandWrites!([String(read![0]).toLowerCase(), ...read!.slice(1)])).toBe(false);
    });

    it('runs its reads and writes', async () => {
      const key = uniqueName('k');
      for (const command of [...dialect.writes(key), ...dialect.reads(key)]) await run(command);
    });

    it('refuses an unknown command by name, and an argv without a name, with BAD_REQUEST', async () => {
      const unknown = await refusal(run(['NOSUCHCOMMAND', 'x']));
      expect(unknown.code).toBe('BAD_REQUEST');
      expect(unknown.message).toMatch(/^command\b/);
      expect(unknown.message).toContain('NOSUCHCOMMAND');
      for (const argv of [[], [42], [null, 'x']]) {
        const err = await refusal(run(argv));
        expect(err.code, JSON.stringify(argv)).toBe('BAD_REQUEST');
        expect(err.message, JSON.stringify(argv)).toMatch(/^command\b/);
      }
    });

    it('keeps values as they were sent', async () => {
      for (const value of [...STRINGS, ...(dialect.jsonValues ? JSON_VALUES : [])]) {
        const trip = dialect.roundTrip(uniqueName('k'), value);
        const store = await own();
        await run(trip.put, 10_000, store);
        expect(trip.value(await run(trip.get, 10_000, store)), JSON.stringify(value)).toEqual(value);
      }
    });

    it(dialect.jsonValues ? 'takes any JSON value' : 'refuses a value that is neither a string nor {"$base64": ...}, naming it', async () => {
      if (dialect.jsonValues) return;
      const trip = dialect.roundTrip(uniqueName('k'), { a: 1 });
      const err = await refusal(run(trip.put));
      expect(err.code).toBe('BAD_REQUEST');
      expect(err.message).toMatch(/^command\[\d+\]: /);
    });

    it('serves calls at once, each whole', async () => {
      const counter = dialect.counter(uniqueName('count'));
      const store = await own();
      await Promise.all(Array.from({ length: 50 }, () => run(counter.bump, 10_000, store)));
      expect(counter.value(await run(counter.read, 10_000, store))).toBe(50);
    });

    const slow = dialect.slow;
    if ('command' in slow) {
      it(`answers ${slow.answers === 'TIMEOUT' ? 'TIMEOUT' : 'as a long poll ends'} at timeout_ms and serves again`, async () => {
        const handle = slow.handle ? await slow.handle(context) : context.store();
        const started = Date.now();
        const outcome = run(slow.command, 500, handle);
        if (slow.answers === 'TIMEOUT') {
          expect((await refusal(outcome)).code).toBe('TIMEOUT');
        } else {
          expect(await outcome).toEqual(slow.answers.value);
        }
        const elapsed = Date.now() - started;
        expect(elapsed).toBeGreaterThanOrEqual(450);
        expect(elapsed).toBeLessThan(500 + 2000);
        if (slow.handle) await handle.close();
        const counter = dialect.counter(uniqueName('after'));
        const store = await own();
        await run(counter.bump, 10_000, store);
        expect(counter.value(await run(counter.read, 10_000, store))).toBe(1);
      });
    } else {
      it.skip(`answers at timeout_ms: ${slow.skip}`, () => undefined);
    }

    const full = dialect.full;
    if ('fill' in full) {
      it('answers a full store PAYLOAD_TOO_LARGE naming config.max_bytes and keeps what it holds', async () => {
        const { handle } = await context.newStore(full.config);
        const kept = dialect.roundTrip(uniqueName('kept'), 'kept');
        await run(kept.put, 10_000, handle);
        const err = await refusal(run(full.fill, 10_000, handle));
        expect(err.code).toBe('PAYLOAD_TOO_LARGE');
        expect(err.message).toContain('config.max_bytes');
        expect(kept.value(await run(kept.get, 10_000, handle))).toBe('kept');
      });
    } else {
      it.skip(`answers a full store PAYLOAD_TOO_LARGE: ${full.skip}`, () => undefined);
    }
  });
}
