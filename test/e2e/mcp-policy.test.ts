import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startMcp, texts, type McpProcess } from '../helpers/mcp-process.js';

const dir = mkdtempSync(join(tmpdir(), 'sandboxd-mcp-policy-'));
const config = join(dir, 'sandboxd.toml');
writeFileSync(
  config,
  `[policy]\nfile = "${join(dir, 'policy.toml')}"\n\n` +
    `[[api.keys]]\nname = "ci"\nkey = "ci-key-00001"\n\n[[api.keys]]\nname = "ops"\nkey = "ops-key-0001"\nadmin = true\n`,
);
writeFileSync(
  join(dir, 'policy.toml'),
  `[[rules]]\nid = "no-sudo-for-ci"\neffect = "deny"\nprincipals = ["ci"]\nactions = ["sandbox.exec"]\nwhen = { sudo = true }\nreason = "CI keys may not sudo"\n`,
);
const processes: McpProcess[] = [];
afterAll(async () => {
  for (const mcp of processes) await mcp.close();
  rmSync(dir, { recursive: true, force: true });
});

/** `sandboxd mcp` in-process (fake backend): its tool calls carry its key, so the policy file decides them. */
describe('sandboxd mcp under a policy', () => {
  it('makes every call as the principal of the key it was given', async () => {
    const mcp = await startMcp(['--config', config, '--backend', 'fake', '--data-dir', join(dir, 'data-1'), '--allow-sudo-exec', '--api-key', 'ci-key-00001']);
    processes.push(mcp);
    expect((await mcp.call('sandbox_create', { name: 'build-1' })).isError).toBeFalsy();
    expect((await mcp.call('sandbox_exec', { name: 'build-1', command: ['id'] })).isError).toBeFalsy();
    const denied = await mcp.call('sandbox_exec', { name: 'build-1', command: ['id'], sudo: true });
    expect(denied.isError).toBe(true);
    expect(texts(denied)[0]).toBe("policy denied sandbox.exec on sandbox:build-1 for key 'ci': CI keys may not sudo (rule no-sudo-for-ci)");
    const grant = await mcp.call('permission_grant', { principal: 'ci', kind: 'sudo_exec' });
    expect(texts(grant)[0]).toBe("permissions.grant is admin-only: key 'ci' is not an admin key");
  });

  it('without a key of its own, uses the first [[api.keys]] entry', async () => {
    const mcp = await startMcp(['--config', config, '--backend', 'fake', '--data-dir', join(dir, 'data-2'), '--allow-sudo-exec']);
    processes.push(mcp);
    await mcp.call('sandbox_create', { name: 'build-2' });
    const denied = await mcp.call('sandbox_exec', { name: 'build-2', command: ['id'], sudo: true });
    expect(texts(denied)[0]).toContain("for key 'ci'");
  });
});
