import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROUTE_ACTIONS } from '../../../../src/http/policy-actions.js';
import { registerPolicy } from '../../../../src/http/policy.js';
import type { Services } from '../../../../src/services/services.js';
import { ACTIONS } from '../../../../src/services/governance/index.js';
import { fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';

describe('the route action table', () => {
  let harness: FakeHarness;
  beforeAll(async () => {
    // Building the app registers every route; a route without an entry would make this throw.
    harness = await fakeHarness();
  });
  afterAll(async () => harness.close());

  it('has an entry for every route of the app, and only for routes that exist', () => {
    for (const key of Object.keys(ROUTE_ACTIONS)) {
      const [method, url] = key.split(' ') as [string, string];
      expect(harness.app.hasRoute({ method: method as 'GET', url }), key).toBe(true);
    }
  });

  it('maps every entry to a known action', () => {
    for (const [key, entry] of Object.entries(ROUTE_ACTIONS)) {
      if (entry !== 'open') expect(ACTIONS, key).toContain(entry.action);
    }
  });

  it('refuses to register a route the table does not know', async () => {
    const app = Fastify();
    registerPolicy(app, {} as Pick<Services, 'policy' | 'exec' | 'sandboxes'>);
    expect(() => app.get('/sandboxes', async () => 'listed')).not.toThrow();
    expect(() => app.post('/not-in-the-table', async () => 'x')).toThrow(
      'route POST /not-in-the-table has no entry in ROUTE_ACTIONS (src/http/policy-actions.ts): give it an action',
    );
    await app.close();
  });

  it('gives resources and contexts from the validated request', () => {
    const noLookups = { sandboxName: async () => undefined };
    const entry = (key: string) => ROUTE_ACTIONS[key] as Exclude<(typeof ROUTE_ACTIONS)[string], 'open'>;
    const exec = entry('POST /sandboxes/:name/exec');
    const input = { params: { name: 'build-1' }, body: { command: ['sudo', 'id'], sudo: true }, query: {} };
    expect([exec.action, exec.resource(input, noLookups), exec.context?.(input)]).toEqual(['sandbox.exec', 'sandbox:build-1', { sudo: true, command0: 'sudo' }]);
    const shell = { params: { name: 'b' }, body: { command: '  ls -la' }, query: {} };
    expect(exec.context?.(shell)).toEqual({ sudo: false, command0: 'ls' });
    const create = entry('POST /sandboxes');
    const body = { name: 'web', image: 'sandboxd/python:3', labels: { team: 'a' } };
    expect(create.context?.({ params: {}, body, query: {} })).toEqual({ image: 'sandboxd/python:3', profile: 'moderate', labels: { team: 'a' } });
    const batch = entry('POST /batch/run');
    expect(batch.context?.({ params: {}, body: { commands: [{ command: ['a'] }, { command: ['b'], sudo: true, profile: 'permissive' }] }, query: {} })).toEqual([
      { sudo: false, command0: 'a' },
      { sudo: true, command0: 'b', profile: 'permissive' },
    ]);
    const call = entry('POST /objects/:class/:object_id/call/:method');
    expect([call.action, call.resource({ params: { class: 'Counter', object_id: 'c1', method: 'inc' }, body: {}, query: {} }, noLookups)]).toEqual([
      'object.call',
      'object:Counter/c1',
    ]);
  });
});
