import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ApiKey } from '../../../src/domain/principals.js';
import { injectClient } from '../../../src/client/inject-client.js';
import { domainTools } from '../../../src/services/domains.js';
import { createMcpServer, type SandboxdMcpServer } from '../../../src/mcp/server.js';
import { silentLogger } from '../../../src/telemetry/logger.js';
import { fakeHarness, type FakeHarness } from '../../helpers/fake-app.js';
import { texts } from '../../helpers/mcp-process.js';

const KEYS: ApiKey[] = [
  { name: 'ops', key: 'ops-key-0001', admin: true, labels: {} },
  { name: 'ci', key: 'ci-key-00001', admin: false, labels: {} },
];

/** MCP tool calls in-process carry the key `sandboxd mcp` was given: the same policy decides them. */
describe('policy and permissions through the MCP tools', () => {
  let harness: FakeHarness;
  const sessions: { client: Client; mcp: SandboxdMcpServer }[] = [];

  beforeEach(async () => {
    const policyFile = join(mkdtempSync(join(tmpdir(), 'sandboxd-policy-')), 'policy.json');
    writeFileSync(
      policyFile,
      JSON.stringify({
        default: 'deny',
        rules: [
          { id: 'admins', effect: 'allow', when: { 'principal.admin': true } },
          { id: 'ci-sandboxes', effect: 'allow', principals: ['ci'], actions: ['sandbox.*', 'permissions.list'] },
          { id: 'no-sudo-for-ci', effect: 'deny', principals: ['ci'], actions: ['sandbox.exec'], when: { sudo: true }, reason: 'CI keys may not sudo' },
        ],
      }),
    );
    harness = await fakeHarness({ namedKeys: KEYS, allowSudoExec: true, policyFile });
  });
  afterEach(async () => {
    for (const { client, mcp } of sessions.splice(0)) {
      await client.close();
      await mcp.close();
    }
    await harness.close();
  });

  /** MCP sessions whose in-process calls carry these keys (every client is made before the app's first request). */
  async function openSessions<K extends string[]>(...keys: K): Promise<{ [I in keyof K]: Awaited<ReturnType<typeof session>> }> {
    const apis = keys.map((key) => injectClient(harness.app, 'test', key));
    return (await Promise.all(apis.map(session))) as { [I in keyof K]: Awaited<ReturnType<typeof session>> };
  }
  async function session(api: ReturnType<typeof injectClient>) {
    const mcp = await createMcpServer({ api, logger: silentLogger(), tools: domainTools() });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await mcp.server.connect(serverSide);
    const client = new Client({ name: 'unit', version: '1' });
    await client.connect(clientSide);
    sessions.push({ client, mcp });
    return async (name: string, args: Record<string, unknown> = {}) => (await client.callTool({ name, arguments: args })) as CallToolResult;
  }

  it('denies a tool call by the rule that denies its route', async () => {
    const [ci] = await openSessions('ci-key-00001');
    expect((await ci('sandbox_create', { name: 'build-1' })).isError).toBeFalsy();
    expect((await ci('sandbox_exec', { name: 'build-1', command: ['id'] })).isError).toBeFalsy();
    const denied = await ci('sandbox_exec', { name: 'build-1', command: ['id'], sudo: true });
    expect(denied.isError).toBe(true);
    expect(texts(denied)[0]).toBe("policy denied sandbox.exec on sandbox:build-1 for key 'ci': CI keys may not sudo (rule no-sudo-for-ci)");
    const schedule = await ci('schedule_list');
    expect(texts(schedule)[0]).toBe("policy denied schedule.list on schedule:* for key 'ci': no rule allows it and the default is deny");
  });

  it('grants, lists and revokes permissions with an admin key, and refuses them to others', async () => {
    const [ops, ci] = await openSessions('ops-key-0001', 'ci-key-00001');
    const refused = await ci('permission_grant', { principal: 'ci', action: 'schedule.list' });
    expect(refused.isError).toBe(true);
    expect(texts(refused)[0]).toBe("permissions.grant is admin-only: key 'ci' is not an admin key");

    const granted = JSON.parse(texts(await ops('permission_grant', { principal: 'ci', action: 'schedule.list', scope: 'session' }))[0]!);
    expect(granted).toMatchObject({ principal: 'ci', action: 'schedule.list', resource: '*', scope: 'session', granted_by: 'ops' });
    expect(JSON.parse(texts(await ci('permission_list'))[0]!)).toEqual([granted]);
    expect(JSON.parse(texts(await ci('schedule_list'))[0]!)).toEqual([]);
    expect((await ci('permission_revoke', { id: granted.id })).isError).toBe(true);
    expect(texts(await ops('permission_revoke', { id: granted.id }))).toEqual([`permission '${granted.id}' revoked`]);
    expect((await ci('schedule_list')).isError).toBe(true);
  });
});
