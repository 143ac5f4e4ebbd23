import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { injectClient } from '../../../../src/client/inject-client.js';
import { fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';
import { texts } from '../../../helpers/mcp-process.js';
import { mcpSession, type McpSession } from '../../../helpers/mcp-session.js';

/** The schedule tools through the in-process API (fake backend). */
describe('schedule MCP tools', () => {
  let harness: FakeHarness;
  let session: McpSession;
  const call = (name: string, args: Record<string, unknown> = {}) => session.call(name, args);

  beforeAll(async () => {
    harness = await fakeHarness();
    await harness.services.sandboxes.create({ name: 'box' });
    session = await mcpSession(injectClient(harness.app, 'test'));
  });
  afterAll(async () => {
    await session.close();
    await harness.close();
  });

  it('creates, lists, triggers and deletes a schedule', async () => {
    const created = await call('schedule_create', { name: 'job', method: 'exec', target_sandbox: 'box', args: { command: ['true'] }, cron: '@daily' });
    expect(created.isError).toBeFalsy();
    expect(JSON.parse(texts(created)[0]!)).toMatchObject({ name: 'job', cron: '@daily', status: 'active' });
    expect(JSON.parse(texts(await call('schedule_list'))[0]!).map((s: { name: string }) => s.name)).toEqual(['job']);
    expect(JSON.parse(texts(await call('schedule_list', { status: 'paused' }))[0]!)).toEqual([]);
    expect(JSON.parse(texts(await call('schedule_trigger', { schedule: 'job' }))[0]!)).toMatchObject({ status: 'succeeded', result: { exit_code: 0 } });
    expect(texts(await call('schedule_delete', { schedule: 'job' }))).toEqual(["schedule 'job' deleted"]);
  });

  it('answers bad input and unknown schedules with isError results that name the field', async () => {
    const never = await call('schedule_create', { name: 'job', method: 'run', args: { command: ['true'] }, cron: '0 0 30 2 *' });
    expect(never).toMatchObject({ isError: true, content: [{ type: 'text', text: 'cron: never fires' }] });
    const missing = await call('schedule_trigger', { schedule: 'ghost' });
    expect(missing).toMatchObject({ isError: true, content: [{ type: 'text', text: "schedule 'ghost' not found" }] });
    const badName = await call('schedule_create', { name: 'Bad', method: 'run', cron: '* * * * *' });
    expect(badName.isError).toBe(true);
    expect(texts(badName)[0]).toMatch(/name/);
  });
});
