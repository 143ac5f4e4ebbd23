import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DurableTimers, FIRST_RETRY_MS, MAX_WAIT_MS, type TimerSource } from '../../../../src/services/durable/index.js';
import type { Clock } from '../../../../src/services/support/clock.js';
import { openStore, type Store } from '../../../../src/state/store.js';
import { silentLogger } from '../../../../src/telemetry/logger.js';
import { fakeHarness } from '../../../helpers/fake-app.js';
import { manualClock } from '../../../helpers/manual-clock.js';
import type { SqliteSql } from '../../../../src/state/sql.js';

/** A statement of this SQLite store, run synchronously: the test source reads and writes its own table. */
const prepared = (store: Store, text: string) => (store.sql as SqliteSql).statement(text);

/**
 * A timer source over a real table of the SQLite store: its due times live only in the table,
 * as every real source's do, and `tick` claims the due rows with one conditional UPDATE.
 */
class TableSource implements TimerSource {
  ticks = 0;

  constructor(
    readonly name: string,
    private readonly store: Store,
    private readonly timers?: DurableTimers,
  ) {
    prepared(store, 'CREATE TABLE IF NOT EXISTS test_due (id TEXT PRIMARY KEY, source TEXT NOT NULL, due_at INTEGER NOT NULL, fired_at INTEGER)').run();
  }

  /** Adds work due at `due` and pokes the driver, as a source does after every write. */
  add(id: string, due: Date): Promise<void> {
    prepared(this.store, 'INSERT INTO test_due (id, source, due_at) VALUES (?, ?, ?)').run(id, this.name, due.getTime());
    return this.timers?.poke() ?? Promise.resolve();
  }

  nextDue(): Date | null {
    const row = prepared(this.store, 'SELECT MIN(due_at) AS due FROM test_due WHERE source = ? AND fired_at IS NULL').get(this.name) as { due: number | null };
    return row.due === null ? null : new Date(row.due);
  }

  async tick(now: Date): Promise<void> {
    this.ticks++;
    prepared(this.store, 'UPDATE test_due SET fired_at = ? WHERE source = ? AND fired_at IS NULL AND due_at <= ?')
      .run(now.getTime(), this.name, now.getTime());
  }

  /** Ids of the fired rows, in due order. */
  fired(): string[] {
    const rows = prepared(this.store, 'SELECT id FROM test_due WHERE source = ? AND fired_at IS NOT NULL ORDER BY due_at').all(this.name) as { id: string }[];
    return rows.map((r) => r.id);
  }
}

/** Gates not opened yet; afterEach opens them, so that a failed test does not hang close(). */
const gates: (() => void)[] = [];

/** A promise the test settles by hand. */
function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  gates.push(open);
  return { promise, open };
}

let dataDir: string;
let store: Store;
let clock: Clock;
let advance: (seconds: number) => void;
let timers: DurableTimers;
const failed: string[] = [];
const at = (seconds: number) => new Date(clock().getTime() + seconds * 1000);

beforeEach(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'sandboxd-timers-'));
  store = await openStore(dataDir);
  ({ clock, advance } = manualClock());
  failed.length = 0;
  timers = new DurableTimers({ clock, logger: silentLogger(), onFailure: (source) => failed.push(source) });
});

afterEach(async () => {
  vi.useRealTimers();
  gates.splice(0).forEach((open) => open());
  await timers.close();
  await store.close();
  rmSync(dataDir, { recursive: true, force: true });
});

describe('DurableTimers', () => {
  it('wakes for the earliest due time across sources and ticks only the sources that are due', async () => {
    const a = new TableSource('a', store, timers);
    const b = new TableSource('b', store, timers);
    const idle = new TableSource('idle', store, timers);
    timers.register(a);
    timers.register(b);
    timers.register(idle);
    await a.add('a1', at(20));
    await b.add('b1', at(5));
    await timers.start();
    expect(timers.nextWake).toEqual({ at: at(5), delayMs: 5_000 });

    advance(5);
    await timers.tick();
    expect([a.fired(), b.fired(), idle.fired()]).toEqual([[], ['b1'], []]);
    expect([a.ticks, b.ticks, idle.ticks]).toEqual([0, 1, 0]);
    expect(timers.nextWake).toEqual({ at: at(15), delayMs: 15_000 });

    advance(15);
    await timers.tick();
    expect(a.fired()).toEqual(['a1']);
    expect(timers.nextWake?.delayMs).toBe(MAX_WAIT_MS);
  });

  it('fires work that came due while it was stopped at start, and a restart over the same store loses nothing', async () => {
    const source = new TableSource('jobs', store, timers);
    timers.register(source);
    await source.add('overdue', at(-60));
    await source.add('later', at(600));
    await timers.start();
    expect(source.fired()).toEqual(['overdue']);
    await timers.close();
    await store.close();

    // A new process: a new store connection, driver and source; the due time comes from the table.
    store = await openStore(dataDir);
    timers = new DurableTimers({ clock, logger: silentLogger() });
    const again = new TableSource('jobs', store, timers);
    timers.register(again);
    await timers.start();
    expect(again.fired()).toEqual(['overdue']);
    advance(600);
    await timers.tick();
    expect(again.fired()).toEqual(['overdue', 'later']);
  });

  it('re-reads the sources when poked after a write, and only then', async () => {
    const source = new TableSource('jobs', store);
    timers.register(source);
    await timers.start();
    expect(timers.nextWake).toEqual({ at: at(30), delayMs: MAX_WAIT_MS });

    // A write without a poke: the driver holds no due times of its own, so it does not know yet.
    await source.add('soon', at(2));
    expect(timers.nextWake?.delayMs).toBe(MAX_WAIT_MS);
    await timers.poke();
    expect(timers.nextWake).toEqual({ at: at(2), delayMs: 2_000 });

    // A due time already past arms a wake-up at once.
    await source.add('past', at(-1));
    await timers.poke();
    expect(timers.nextWake?.delayMs).toBe(0);
  });

  it('waits 30 s at most, however far away the next due time is', async () => {
    const source = new TableSource('jobs', store, timers);
    timers.register(source);
    // 40 days: past setTimeout's ~24.8-day limit, where Node would fire at once.
    await source.add('far', at(40 * 86_400));
    await timers.start();
    expect(timers.nextWake?.delayMs).toBe(MAX_WAIT_MS);
    advance(30);
    await timers.tick();
    expect(source.fired()).toEqual([]);
    expect(timers.nextWake?.delayMs).toBe(MAX_WAIT_MS);
  });

  it('fires on its next wake-up after the clock jumps forward', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const source = new TableSource('jobs', store, timers);
    timers.register(source);
    await source.add('in-an-hour', at(3600));
    await timers.start();
    expect(timers.nextWake?.delayMs).toBe(MAX_WAIT_MS);

    advance(2 * 3600);
    // The wake-up armed before the jump fires on its own and re-reads the due rows.
    await vi.advanceTimersByTimeAsync(MAX_WAIT_MS);
    expect(source.fired()).toEqual(['in-an-hour']);
  });

  it('fires nothing early after the clock jumps back, and still wakes every 30 s', async () => {
    const source = new TableSource('jobs', store, timers);
    timers.register(source);
    await source.add('in-10s', at(10));
    await timers.start();
    expect(timers.nextWake?.delayMs).toBe(10_000);

    advance(-3600);
    await timers.tick();
    expect(source.fired()).toEqual([]);
    expect(timers.nextWake?.delayMs).toBe(MAX_WAIT_MS);
    advance(3610);
    await timers.tick();
    expect(source.fired()).toEqual(['in-10s']);
  });

  it('logs and counts a throwing source, backs it off, and goes on with the others', async () => {
    const healthy = new TableSource('healthy', store, timers);
    let broken = true;
    const flaky = new TableSource('flaky', store, timers);
    const tickFlaky = flaky.tick.bind(flaky);
    flaky.tick = async (now) => {
      if (broken) throw new Error('row locked');
      await tickFlaky(now);
    };
    const unreadable: TimerSource = {
      name: 'unreadable',
      nextDue: async () => {
        throw new Error('no such table');
      },
      tick: () => undefined,
    };
    timers.register(flaky);
    timers.register(unreadable);
    timers.register(healthy);
    await flaky.add('f1', at(-1));
    await healthy.add('h1', at(-1));

    await timers.start();
    expect(healthy.fired()).toEqual(['h1']);
    expect(flaky.fired()).toEqual([]);
    expect(failed.sort()).toEqual(['flaky', 'unreadable']);
    expect(timers.failures).toBe(2);
    // The failed sources are retried after a back-off, not in a tight loop.
    expect(timers.nextWake?.delayMs).toBe(FIRST_RETRY_MS);

    await timers.tick();
    expect(timers.failures).toBe(2);
    advance(1);
    await timers.tick();
    expect(timers.failures).toBe(4);
    expect(timers.nextWake?.delayMs).toBe(2 * FIRST_RETRY_MS);

    broken = false;
    advance(2);
    await timers.tick();
    expect(flaky.fired()).toEqual(['f1']);
    expect(timers.failures).toBe(5);
  });

  it('never runs two ticks at once: a tick asked for during one runs after it, once', async () => {
    const source = new TableSource('slow', store, timers);
    const release = gate();
    let entered = 0;
    let inside = 0;
    let mostInside = 0;
    const tickSource = source.tick.bind(source);
    source.tick = async (now) => {
      entered++;
      inside++;
      mostInside = Math.max(mostInside, inside);
      await release.promise;
      await tickSource(now);
      inside--;
    };
    timers.register(source);
    await source.add('one', at(-1));

    const first = timers.tick();
    await vi.waitFor(() => expect(inside).toBe(1));
    // Due after the first tick's `now`, and due by the time the next one starts.
    await source.add('two', at(1));
    const asked = [timers.tick(), timers.tick(), timers.tick()];
    expect(asked[1]).toBe(asked[0]);
    expect(asked[2]).toBe(asked[0]);
    advance(1);
    expect(entered).toBe(1);
    release.open();
    await Promise.all([first, ...asked]);
    expect([entered, mostInside]).toEqual([2, 1]);
    expect(source.fired()).toEqual(['one', 'two']);
  });

  it('close waits for a tick in flight, then neither ticks nor arms again', async () => {
    const source = new TableSource('slow', store, timers);
    const release = gate();
    let entered = false;
    const tickSource = source.tick.bind(source);
    source.tick = async (now) => {
      entered = true;
      await release.promise;
      await tickSource(now);
    };
    timers.register(source);
    await source.add('one', at(-1));
    void timers.start();
    await vi.waitFor(() => expect(entered).toBe(true));

    let closed = false;
    const closing = timers.close().then(() => (closed = true));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(closed).toBe(false);
    release.open();
    await closing;
    expect(source.fired()).toEqual(['one']);
    expect(timers.nextWake).toBeUndefined();

    await source.add('two', at(-1));
    await timers.tick();
    await timers.poke();
    expect(source.fired()).toEqual(['one']);
    expect(timers.nextWake).toBeUndefined();
  });

  it('refuses a second source of the same name and forgets a removed one', async () => {
    const source = new TableSource('jobs', store, timers);
    const remove = timers.register(source);
    expect(() => timers.register(new TableSource('jobs', store))).toThrow(/named 'jobs' is registered already/);
    await source.add('one', at(-1));
    remove();
    await timers.tick();
    expect(source.fired()).toEqual([]);
  });
});

describe('the timers of the service layer', () => {
  it('count source failures in sandboxd_timer_failures_total and are stopped by Services.close', async () => {
    const { clock: harnessClock } = manualClock();
    const harness = await fakeHarness({}, harnessClock);
    const { timers: serviceTimers } = harness.services;
    serviceTimers.register({ name: 'broken', nextDue: () => new Date(0), tick: () => Promise.reject(new Error('boom')) });
    await serviceTimers.tick();
    const metrics = await harness.services.observability.metrics.scrape();
    expect(metrics.text).toContain('sandboxd_timer_failures_total{source="broken"} 1');
    await harness.close();
    await serviceTimers.tick();
    expect(serviceTimers.failures).toBe(1);
  });
});
