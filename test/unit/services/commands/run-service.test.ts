import { afterEach, describe, expect, it } from 'vitest';
import { ServiceError } from '../../../../src/errors.js';
import { fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';

let h: FakeHarness;
afterEach(async () => h?.close());

describe('RunService', () => {
  it('fast: false runs in a fresh sandbox of the given image and profile, then removes it', async () => {
    h = await fakeHarness();
    h.backend.images.add('sandboxd/python:bookworm');
    let seen: unknown;
    h.backend.onExec = (request, spec) => {
      seen = spec;
      return { chunks: [{ stream: 'stdout', text: `${request.command.join(' ')} in ${request.workdir}\n` }], exit_code: 3 };
    };
    const result = await h.services.runs.run({ command: ['echo', 'hi'], image: 'sandboxd/python:bookworm', profile: 'restrictive', workdir: '/tmp', fast: false });
    expect(result).toMatchObject({ output: 'echo hi in /tmp\n', exit_code: 3, timed_out: false });
    expect(seen).toMatchObject({ image: 'sandboxd/python:bookworm', profile: 'restrictive', name: expect.stringMatching(/^run-[0-9a-f]{12}$/) });
    expect(h.backend.instances.size).toBe(0);
    expect(await h.services.sandboxes.list()).toEqual([]);
    const created = h.backend.calls.filter((c) => c.op === 'create');
    expect(created).toHaveLength(1);
  });

  it('removes its sandbox when the command cannot run', async () => {
    h = await fakeHarness();
    for (const fast of [true, false]) {
      h.backend.failNext('exec', new ServiceError('INTERNAL', 'engine exploded'));
      await expect(h.services.runs.run({ command: ['true'], fast })).rejects.toThrow('engine exploded');
      // A fast run's instance is discarded by the pool; a sandbox's container goes in the background (departures).
      await h.services.pool.settled();
      await h.services.departures.settled();
      expect(h.backend.instances.size).toBe(0);
    }
  });

  it('refuses sudo while it is disabled before making a sandbox', async () => {
    h = await fakeHarness();
    await expect(h.services.runs.run({ command: ['id'], sudo: true })).rejects.toMatchObject({ code: 'FORBIDDEN' });
    expect(h.backend.calls.filter((c) => c.op === 'create')).toEqual([]);
  });
});
