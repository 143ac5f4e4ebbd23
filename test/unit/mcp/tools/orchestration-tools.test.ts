import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { injectClient } from '../../../../src/client/inject-client.js';
import { fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';
import { texts } from '../../../helpers/mcp-process.js';
import { mcpSession, type McpSession } from '../../../helpers/mcp-session.js';

/** The orchestration tools through the in-process API (fake backend). */
describe('orchestration MCP tools', () => {
  let harness: FakeHarness;
  let session: McpSession;
  const call = (name: string, args: Record<string, unknown> = {}) => session.call(name, args);
  const data = (result: CallToolResult) => JSON.parse(texts(result)[0]!);

  beforeAll(async () => {
    harness = await fakeHarness();
    session = await mcpSession(injectClient(harness.app, 'test'));
  });
  afterAll(async () => {
    await session.close();
    await harness.close();
  });

  it('defines, starts, raises an event, gets, lists and terminates', async () => {
    const defined = await call('orchestration_define', {
      definition: { name: 'approval', steps: [{ id: 'wait', type: 'wait_for_event', event: 'approved' }, { id: 'hold', type: 'wait_for_event', event: 'never' }] },
    });
    expect(data(defined)).toMatchObject({ name: 'approval', version: 1 });
    const started = data(await call('orchestration_start', { name: 'approval', id: 'job-1', input: { who: 'me' } }));
    expect(started).toMatchObject({ id: 'job-1', status: 'waiting', waiting_for: ['approved'] });
    expect(data(await call('orchestration_raise_event', { id: 'job-1', name: 'approved', data: { ok: true } }))).toMatchObject({ accepted: true, event: 'approved' });
    const got = data(await call('orchestration_get', { id: 'job-1' }));
    expect(got).toMatchObject({ waiting_for: ['never'] });
    expect(got.history).toBeUndefined();
    expect(data(await call('orchestration_get', { id: 'job-1', history: true })).history.length).toBeGreaterThan(0);
    expect(data(await call('orchestration_list', { status: 'waiting' })).map((i: { id: string }) => i.id)).toEqual(['job-1']);
    expect(data(await call('orchestration_terminate', { id: 'job-1', reason: 'enough' }))).toMatchObject({ status: 'terminated', error: 'enough' });
  });

  it('answers bad input with isError results that name the field', async () => {
    const invalid = await call('orchestration_define', { definition: { name: 'bad', steps: [{ id: 'a', type: 'loop' }] } });
    expect(invalid.isError).toBe(true);
    expect(texts(invalid)[0]).toMatch(/steps\[0\]\.type: unknown step type 'loop'/);
    expect(await call('orchestration_start', { name: 'ghost' })).toMatchObject({ isError: true, content: [{ type: 'text', text: "orchestration definition 'ghost' not found" }] });
    expect(await call('orchestration_terminate', { id: 'job-1' })).toMatchObject({ isError: true });
  });
});
