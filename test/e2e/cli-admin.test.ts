import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliSession, jsonOf, tableRows } from '../helpers/cli-session.js';
import { startServer, type ServerProcess } from '../helpers/server-process.js';

const KEY = 'cli-admin-test-key';

const KEEP_RULE = `
[[rules]]
id = "keep-volumes"
effect = "deny"
actions = ["volume.delete"]
resources = ["volume:keep-*"]
reason = "keep volumes stay"
`;

/**
 * The policy, permission grants and the LLM gateway's keys through the CLI, against a spawned
 * server on the fake backend with a rule file and an environment variable that holds a key.
 */
describe('sandboxd policy, permission and llm (fake backend)', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'sandboxd-cli-admin-'));
  const policyFile = join(dataDir, 'policy.toml');
  let server: ServerProcess;
  const { cli, cliWithInput } = cliSession(() => ({ SERVICE_DATA_DIR: dataDir, SERVICE_API_KEY: KEY, SERVICE_URL: '' }));

  beforeAll(async () => {
    writeFileSync(policyFile, `default = "allow"\n${KEEP_RULE}`);
    server = await startServer(dataDir, ['--backend', 'fake', '--api-key', KEY, '--policy-file', policyFile], { CLI_ADMIN_LLM_KEY: 'sk-from-the-server-env' });
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('shows the policy, checks decisions as a dry run, lists denials and reloads the rule file', async () => {
    const status = await cli('policy', 'status');
    expect(status).toMatchObject({ code: 0, stderr: '' });
    expect(status.stdout).toMatch(/^enabled: +true$/m);
    expect(status.stdout).toMatch(/^rule_count: +1$/m);
    expect(jsonOf(await cli('policy', 'get', '--json'))).toMatchObject({ enabled: true, mode: 'enforce', default: 'allow', source: policyFile, rule_count: 1 });

    const denied = await cli('policy', 'check', 'volume.delete', 'volume:keep-1');
    expect(denied.stdout).toMatch(/^decision: +deny$/m);
    expect(denied.stdout).toMatch(/^matched_rules: +\["keep-volumes"\]$/m);
    expect(jsonOf(await cli('policy', 'check', 'volume.delete', 'volume:scratch', '--json'))).toMatchObject({ decision: 'allow', via: 'default' });

    await cli('volume', 'create', 'keep-1');
    const refused = await cli('volume', 'rm', 'keep-1');
    expect(refused).toMatchObject({ code: 1, stdout: '' });
    expect(refused.stderr).toContain('keep volumes stay');
    const [header, ...rows] = tableRows((await cli('policy', 'audit', '--decision', 'deny')).stdout);
    expect(header).toEqual(['TIME', 'PRINCIPAL', 'ACTION', 'RESOURCE', 'DECISION', 'RULE', 'REASON']);
    expect(rows).toContainEqual([expect.stringMatching(/Z$/), expect.stringMatching(/^key-/), 'volume.delete', 'volume:keep-1', 'deny', 'keep-volumes', 'keep volumes stay']);

    writeFileSync(policyFile, `default = "allow"\n${KEEP_RULE}${KEEP_RULE.replace('keep-volumes', 'keep-again')}`);
    expect(jsonOf(await cli('policy', 'reload', '--json'))).toMatchObject({ reloaded: true, rule_count: 2 });
    writeFileSync(policyFile, 'default = "sometimes"\n');
    const bad = await cli('policy', 'reload');
    expect(bad).toMatchObject({ code: 1, stdout: '' });
    expect(bad.stderr).toContain('default');
    expect(jsonOf(await cli('policy', 'status', '--json'))).toMatchObject({ rule_count: 2, last_error: expect.stringContaining('default') });
  });

  it('grants, lists, checks and revokes permissions', async () => {
    const granted = jsonOf(await cli('permission', 'grant', 'ci', 'sandbox.exec', '--resource', 'sandbox:ci-*', '--scope', 'always', '--json'));
    expect(granted).toMatchObject({ id: expect.any(String), principal: 'ci', action: 'sandbox.exec', resource: 'sandbox:ci-*', scope: 'always' });
    const sudo = await cli('permissions', 'grant', 'ci', 'sudo_exec', '--expires-in', '1h');
    expect(sudo.stdout).toMatch(/^action: +sandbox\.exec$/m);
    expect(sudo.stdout).toMatch(/^when: +\{"sudo":true\}$/m);

    const [header, ...rows] = tableRows((await cli('permission', 'ls')).stdout);
    expect(header).toEqual(['ID', 'PRINCIPAL', 'ACTION', 'RESOURCE', 'SCOPE', 'USES', 'EXPIRES']);
    expect(rows).toEqual([
      [granted.id, 'ci', 'sandbox.exec', 'sandbox:ci-*', 'always', '0', '-'],
      [expect.any(String), 'ci', 'sandbox.exec', '*', 'once', '0', expect.stringMatching(/^in (59m|1h)$/)],
    ]);
    expect(await cli('permission', 'check', 'sandbox.exec', 'sandbox:ci-1')).toEqual({ code: 0, stdout: 'permitted (default)\n', stderr: '' });

    expect(await cli('permission', 'revoke', granted.id)).toEqual({ code: 0, stdout: `${granted.id}\n`, stderr: '' });
    expect(jsonOf<unknown[]>(await cli('permission', 'ls', '--json'))).toHaveLength(1);
    expect(await cli('permission', 'revoke', granted.id)).toMatchObject({ code: 1, stdout: '' });

    const usage: [string[], string][] = [
      [['permission', 'grant', 'ci', 'sandbox.exec', '--scope', 'forever'], "--scope 'forever': expected one of once, session, always"],
      [['policy', 'audit', '--decision', 'maybe'], "--decision 'maybe': expected one of allow, deny"],
      [['policy', 'check', 'sandbox.exec', '--context', 'sudo'], '--context: not JSON'],
      [['policy', 'check'], "missing required argument 'action'"],
    ];
    for (const [args, message] of usage) {
      const result = await cli(...args);
      expect(result, args.join(' ')).toMatchObject({ code: 2, stdout: '' });
      expect(result.stderr, args.join(' ')).toContain(message);
    }
  });

  it("sets the gateway's keys from standard input or a server variable, never showing them, and shows usage", async () => {
    const [header, ...rows] = tableRows((await cli('llm', 'key', 'ls')).stdout);
    expect(header).toEqual(['PROVIDER', 'CONFIGURED', 'SOURCE', 'LAST 4', 'BASE URL']);
    expect(rows).toContainEqual(['openai', 'no', '-', '-', 'https://api.openai.com']);

    const stored = await cliWithInput('sk-test-secret-9876\n', 'llm', 'key', 'set', 'openai', '--stdin');
    expect(stored).toMatchObject({ code: 0, stderr: '' });
    expect(stored.stdout).toMatch(/^source: +stored$/m);
    expect(stored.stdout).toMatch(/^last4: +9876$/m);
    expect(stored.stdout).not.toContain('sk-test-secret');
    const fromEnv = jsonOf(await cli('llm', 'keys', 'set', 'groq', '--env', 'CLI_ADMIN_LLM_KEY', '--base-url', 'https://api.groq.com/openai/v1', '--json'));
    expect(fromEnv).toMatchObject({ provider: 'groq', configured: true, source: 'env', base_url: 'https://api.groq.com/openai/v1' });
    expect(JSON.stringify(jsonOf(await cli('llm', 'key', 'ls', '--json')))).not.toContain('sk-');

    expect(await cli('llm', 'key', 'rm', 'openai', 'groq')).toEqual({ code: 0, stdout: 'openai\ngroq\n', stderr: '' });
    expect(jsonOf(await cli('llm', 'key', 'ls', '--json'))).toContainEqual(expect.objectContaining({ provider: 'openai', configured: false }));

    expect(tableRows((await cli('llm', 'usage')).stdout)).toEqual([
      ['SANDBOX', 'REQUESTS', 'INPUT TOKENS', 'OUTPUT TOKENS', 'ERRORS'],
      ['TOTAL', '0', '0', '0', '0'],
    ]);
    expect(jsonOf(await cli('llm', 'usage', '--since', '2026-01-01', '--json'))).toMatchObject({ since: '2026-01-01', totals: { requests: 0 } });
    expect(await cli('llm', 'usage', 'never-made')).toMatchObject({ code: 1, stderr: expect.stringContaining('never-made') });

    for (const [input, args, message] of [
      [undefined, ['llm', 'key', 'set', 'openai'], 'give the key with --stdin or name a server variable with --env'],
      [undefined, ['llm', 'key', 'set', 'openai', '--stdin', '--env', 'X'], 'give the key with --stdin or name a server variable with --env'],
      ['\n', ['llm', 'key', 'set', 'openai', '--stdin'], 'standard input was empty'],
    ] as const) {
      const result = input === undefined ? await cli(...args) : await cliWithInput(input, ...args);
      expect(result, args.join(' ')).toMatchObject({ code: 2, stdout: '' });
      expect(result.stderr).toContain(message);
    }
    expect(await cli('llm', 'key', 'set', 'anthropic', '--env', 'CLI_ADMIN_NOT_SET')).toMatchObject({ code: 1, stderr: expect.stringContaining('CLI_ADMIN_NOT_SET') });
  });
});
