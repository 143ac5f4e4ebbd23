import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fakeHarness, type FakeHarness } from '../../../../helpers/fake-app.js';
import { scriptObjectRunner } from '../../../../helpers/object-runner-double.js';

/** `call` activities: a durable-object method, with the step's idempotency key. */
let h: FakeHarness;

beforeEach(async () => {
  h = await fakeHarness({ poolSize: 0 });
  scriptObjectRunner(h.backend, {
    counter: {
      increment: (args: { by?: number }, ctx) => {
        const n = (ctx.storage.get('count', 0) as number) + (args?.by ?? 1);
        ctx.storage.put('count', n);
        return n;
      },
      boom: () => {
        throw new Error('no such luck');
      },
    },
  });
  const defined = await h.app.inject({ method: 'POST', url: '/objects/classes', payload: { name: 'counter', runtime: 'node', source: 'export const x = 1;' } });
  expect(defined.statusCode).toBe(201);
});
afterEach(() => h.close());

async function finished(id: string) {
  for (let round = 0; round < 2000; round++) {
    const view = await h.services.orchestrations.get(id);
    if (['completed', 'failed'].includes(view.status)) return view;
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  throw new Error(`orchestration ${id} never finished`);
}

describe('call activities', () => {
  it("output the method's return value; the call carries orch:<instance>:<step path> and runs once per key", async () => {
    const orchestrations = h.services.orchestrations;
    await orchestrations.definitions.save({
      name: 'bump',
      defaults: { timeout_ms: 3_600_000 },
      steps: [{ id: 'bump', type: 'activity', call: { class: 'counter', object_id: 'builds', method: 'increment', args: { by: '${input.by}' } } }],
    });
    const { instance } = await orchestrations.create({ name: 'bump', input: { by: 5 } });
    expect(await finished(instance.id)).toMatchObject({ status: 'completed', output: 5 });
    const calls = (await h.app.inject({ url: '/objects/counter/builds/calls' })).json().data as { method: string; source: string; idempotency_key: string }[];
    expect(calls).toMatchObject([{ method: 'increment', source: 'orchestration', idempotency_key: `orch:${instance.id}:bump` }]);
    // The same call again with that key (what a restart re-runs) changes nothing and answers the first result.
    const again = await h.services.objects.callObject({ class: 'counter', object_id: 'builds', method: 'increment', args: { by: 5 }, idempotency_key: `orch:${instance.id}:bump`, source: 'orchestration' });
    expect(again).toBe(5);
    expect((await h.app.inject({ url: '/objects/counter/builds' })).json().data.storage).toEqual({ count: 5 });
  });

  it('fails the step with the error of a method that throws', async () => {
    const orchestrations = h.services.orchestrations;
    await orchestrations.definitions.save({
      name: 'boom',
      steps: [{ id: 'try', type: 'activity', call: { class: 'counter', object_id: 'x', method: 'boom' }, retry_policy: { max_attempts: 1 } }],
    });
    const { instance } = await orchestrations.create({ name: 'boom' });
    expect(await finished(instance.id)).toMatchObject({ status: 'failed', failed_step: 'try', error: expect.stringContaining('no such luck') });
  });
});
