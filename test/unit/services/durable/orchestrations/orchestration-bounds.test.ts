import { monitorEventLoopDelay } from 'node:perf_hooks';
import { afterEach, describe, expect, it } from 'vitest';
import { fakeHarness, type FakeHarness } from '../../../../helpers/fake-app.js';

/**
 * Issue 25, item 4: one orchestration request must not multiply without bound. A nested map of
 * 1000 x 1000 `set` steps ran 1,001,001 steps, held the event loop for 10 s and took 2.5 GB. The
 * work of an instance is bounded at its start (a static estimate: 400 naming the bound) and while
 * it runs (the instance fails naming the bound), its walks give the event loop a turn (measured
 * here: no delay over 50 ms while the nested map runs), and a GET of it is paged.
 */
let h: FakeHarness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const thousand = Array.from({ length: 1000 }, (_, index) => index);

/** A map over `items` of a map over `inner` of `set` steps. */
const nested = (items: unknown, inner: unknown) => ({
  name: 'nested',
  steps: [
    { id: 'row', type: 'set', value: thousand },
    { id: 'outer', type: 'map', items, step: { type: 'map', items: inner, step: { type: 'set', value: { at: '${index}' } } } },
  ],
});

/**
 * How long the event loop was held at once: a 2 ms interval notes, for each gap between two of
 * its ticks, the process's CPU time in the gap (capped at the gap's wall time). A gap the loop
 * spent held by synchronous work is CPU time; a gap the process spent waiting for a core on a
 * loaded machine (2 cores shared by many test runs) is not, and must not fail the test, so the
 * bound is asserted on the first. monitorEventLoopDelay's wall-clock maximum is shown beside it.
 */
function blockingProbe() {
  const delay = monitorEventLoopDelay({ resolution: 5 });
  delay.enable();
  let wall = performance.now();
  let cpu = process.cpuUsage();
  let longestMs = 0;
  let ticks = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    const used = process.cpuUsage(cpu);
    longestMs = Math.max(longestMs, Math.min((used.user + used.system) / 1000, now - wall));
    ticks += 1;
    wall = now;
    cpu = process.cpuUsage();
  }, 2);
  return {
    stop() {
      clearInterval(timer);
      delay.disable();
      return { longestMs, ticks, wallMaxMs: delay.max / 1e6 };
    },
  };
}

async function finished(id: string) {
  for (let round = 0; round < 3000; round++) {
    const view = await h!.app.inject({ method: 'GET', url: `/orchestrations/${id}?history=false&steps_limit=1` });
    const status = view.json().data.status as string;
    if (['completed', 'failed', 'terminated'].includes(status)) return view.json().data;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error(`orchestration ${id} never finished`);
}

describe('the bounds of one orchestration instance', () => {
  it('refuses at the start a nested map it can count: 400 naming the bound', async () => {
    h = await fakeHarness({ orchestrationMaxHistoryEvents: 1000 });
    const literal = await h.app.inject({ method: 'POST', url: '/orchestrations', payload: { name: 'nested', definition: nested(thousand, thousand) } });
    expect(literal.statusCode).toBe(400);
    expect(literal.json().error).toBe('definition: an instance would run at least 1001002 steps, more than the limit of 10000 (--orchestration-max-steps)');

    // Items that are one expression into the input are counted too.
    const fromInput = await h.app.inject({
      method: 'POST',
      url: '/orchestrations',
      payload: { name: 'nested', input: { rows: thousand, cells: thousand }, definition: nested('${input.rows}', '${input.cells}') },
    });
    expect(fromInput.statusCode).toBe(400);
    expect(fromInput.json().error).toMatch(/at least 1001002 steps, more than the limit of 10000 \(--orchestration-max-steps\)/);

    // Many activities: their history events alone pass the history bound (here 1000).
    const activities = await h.app.inject({
      method: 'POST',
      url: '/orchestrations',
      payload: { name: 'many', definition: { name: 'many', steps: [{ id: 'each', type: 'map', items: thousand, step: { type: 'activity', run: { command: ['true'] } } }] } },
    });
    expect(activities.statusCode).toBe(400);
    expect(activities.json().error).toBe(
      'definition: an instance would keep at least 3002 history events, more than the limit of 1000 (--orchestration-max-history-events)',
    );
  });

  it('fails a nested map of 1000 x 1000 steps it could not count at the step bound, never holding the event loop over 50 ms', async () => {
    h = await fakeHarness();
    const app = h.app;
    // Warm up first: the first request of each route compiles its schemas (not what is measured).
    const warm = await app.inject({ method: 'POST', url: '/orchestrations', payload: { name: 'warm', definition: { name: 'warm', steps: [{ id: 'a', type: 'set', value: 1 }] } } });
    await finished(warm.json().data.id);
    await app.inject({ method: 'GET', url: `/orchestrations/${warm.json().data.id}` });
    await app.inject({ method: 'GET', url: '/health' });
    const probe = blockingProbe();
    // The start walks the instance up to its bound before it answers; /health is served meanwhile.
    let answered = false;
    const posting = app.inject({ method: 'POST', url: '/orchestrations', payload: { name: 'nested', definition: nested('${steps.row.output}', '${steps.row.output}') } });
    void posting.then(() => (answered = true));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect((await app.inject({ method: 'GET', url: '/health' })).statusCode).toBe(200);
    expect(answered).toBe(false);
    const started = await posting;
    const done = await finished(started.json().data.id);
    const blocked = probe.stop();

    expect(started.statusCode).toBe(202);
    expect(done).toMatchObject({ status: 'failed', error: 'step limit reached: the instance would run more than 10000 steps (--orchestration-max-steps)' });
    expect(done.failed_step).toMatch(/^outer\[\d+\]\[\d+\]$/);
    expect(blocked.longestMs, `the event loop was held ${blocked.longestMs.toFixed(1)} ms of CPU at once (wall-clock delay: ${blocked.wallMaxMs.toFixed(1)} ms)`).toBeLessThan(50);
    // The probe ran while the work did (how many times depends on the machine's speed).
    expect(blocked.ticks).toBeGreaterThanOrEqual(10);

    // A GET of it is one page: at most 1000 steps, the rest behind steps_next.
    const got = await app.inject({ method: 'GET', url: `/orchestrations/${done.id}` });
    const view = got.json().data;
    expect(view.steps).toHaveLength(1000);
    expect(view.steps_total).toBe(10_000);
    expect(view.steps_next).toBe(1000);
    expect(view.history_next).toBeNull();
    expect(got.body.length).toBeLessThan(4 * 1024 * 1024 + 64 * 1024);
    const next = (await app.inject({ method: 'GET', url: `/orchestrations/${done.id}?history=false&steps_offset=${view.steps_next}&steps_limit=2` })).json().data;
    expect(next.steps.map((step: { id: string }) => step.id)).toEqual(['outer[0][997]', 'outer[0][998]']);
    expect(next.steps_next).toBe(1002);
  }, 60_000);

  it('fails an instance whose step outputs pass the output bound', async () => {
    h = await fakeHarness();
    const big = 'x'.repeat(100_000);
    const started = await h.app.inject({
      method: 'POST',
      url: '/orchestrations',
      payload: {
        name: 'wide',
        input: { big },
        definition: {
          name: 'wide',
          steps: [
            { id: 'row', type: 'set', value: thousand.slice(0, 100) },
            { id: 'copies', type: 'map', items: '${steps.row.output}', step: { type: 'set', value: '${input.big}' } },
          ],
        },
      },
    });
    const done = await finished(started.json().data.id);
    expect(done).toMatchObject({
      status: 'failed',
      error: 'output limit reached: the outputs of the instance\'s steps pass 8388608 bytes of JSON (--orchestration-max-output-bytes)',
      failed_step: 'copies[83]',
    });
  });

  it('pages the history: history_after and history_limit, history_next where the next page starts', async () => {
    h = await fakeHarness();
    const started = await h.app.inject({
      method: 'POST',
      url: '/orchestrations',
      payload: { name: 'w', definition: { name: 'w', steps: [{ id: 'a', type: 'wait_for_event', event: 'go' }] } },
    });
    const id = started.json().data.id as string;
    for (let index = 0; index < 5; index++) await h.app.inject({ method: 'POST', url: `/orchestrations/${id}/events`, payload: { name: 'other', data: index } });
    const first = (await h.app.inject({ method: 'GET', url: `/orchestrations/${id}?history_limit=2` })).json().data;
    expect(first.history.map((event: { sequence: number }) => event.sequence)).toEqual([1, 2]);
    expect(first.history_next).toBe(2);
    const rest = (await h.app.inject({ method: 'GET', url: `/orchestrations/${id}?history_after=2` })).json().data;
    expect(rest.history.map((event: { sequence: number }) => event.sequence)).toEqual([3, 4, 5, 6]);
    expect(rest.history_next).toBeNull();
  });
});
