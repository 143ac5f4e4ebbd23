import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../../src/config/load-config.js';
import { principalsOf, unnamedKeyName } from '../../../src/domain/principals.js';
import { fakeHarness, type FakeHarness } from '../../helpers/fake-app.js';

const dir = mkdtempSync(join(tmpdir(), 'sandboxd-principals-'));
const toml = (name: string, text: string) => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};

describe('principals in the configuration', () => {
  it('reads [[api.keys]] with key or key_env, admin and labels, beside the unnamed keys', () => {
    const configFile = toml(
      'keys.toml',
      `[api]\napi_key = "unnamed-key-1"\n\n[[api.keys]]\nname = "ci"\nkey = "ci-key-00001"\nlabels = { team = "a" }\n\n[[api.keys]]\nname = "ops"\nkey_env = "OPS_KEY"\nadmin = true\n`,
    );
    const config = loadConfig({ configFile, env: { OPS_KEY: 'ops-key-0001' }, flags: { dataDir: dir } });
    expect(config.namedKeys).toEqual([
      { name: 'ci', key: 'ci-key-00001', admin: false, labels: { team: 'a' } },
      { name: 'ops', key: 'ops-key-0001', admin: true, labels: {} },
    ]);
    expect(config.apiKeys).toEqual(['unnamed-key-1']);
  });

  it('reads the [policy] settings, with their flags and environment twins', () => {
    const configFile = toml('policy.toml', `[policy]\nfile = "rules.toml"\nmode = "audit"\naudit_allows = true\n`);
    const config = loadConfig({ configFile, env: {}, flags: { dataDir: dir } });
    expect(config).toMatchObject({ policyFile: join(process.cwd(), 'rules.toml'), policyMode: 'audit', policyAuditAllows: true });
    const fromEnv = loadConfig({ env: { SERVICE_POLICY_MODE: 'enforce', SERVICE_POLICY_AUDIT_ALLOWS: 'false' }, flags: { dataDir: dir } });
    expect(fromEnv).toMatchObject({ policyMode: 'enforce', policyAuditAllows: false });
    expect(() => loadConfig({ env: {}, flags: { dataDir: dir, policyMode: 'loud' } })).toThrow(/--policy-mode: must be enforce or audit/);
  });

  it.each([
    ['keys = "x"', 'api.keys must be an array of tables'],
    ['[[api.keys]]\nname = "ci"', '[[api.keys]] #1 in'],
    ['[[api.keys]]\nname = "ci"', 'give exactly one of key and key_env'],
    ['[[api.keys]]\nname = "ci"\nkey = "ci-key-00001"\nkey_env = "X"', 'give exactly one of key and key_env'],
    ['[[api.keys]]\nname = "ci"\nkey_env = "MISSING_KEY"', 'key_env: environment variable MISSING_KEY is not set'],
    ['[[api.keys]]\nname = "c i"\nkey = "ci-key-00001"', 'name: must match'],
    ['[[api.keys]]\nname = "ci"\nkey = "short"', 'key: an API key must be at least 8 characters'],
    ['[[api.keys]]\nname = "ci"\nkey = "ci-key-00001"\nadmin = "yes"', 'admin: must be true or false'],
    ['[[api.keys]]\nname = "ci"\nkey = "ci-key-00001"\nrole = "x"', 'Unrecognized key'],
    ['[[api.keys]]\nname = "ci"\nkey = "ci-key-00001"\n[[api.keys]]\nname = "ci"\nkey = "ci-key-00002"', "#2 in", ],
    ['[[api.keys]]\nname = "ci"\nkey = "ci-key-00001"\n[[api.keys]]\nname = "ci"\nkey = "ci-key-00002"', "name: 'ci' is used by another key"],
    ['[[api.keys]]\nname = "ci"\nkey = "ci-key-00001"\n[[api.keys]]\nname = "cd"\nkey = "ci-key-00001"', 'the same key is given to another name'],
  ])('refuses %j, saying what to fix', (text, message) => {
    const body = text.startsWith('keys') ? `[api]\n${text}\n` : `${text}\n`;
    const configFile = toml('bad.toml', body);
    expect(() => loadConfig({ configFile, env: {}, flags: { dataDir: dir } })).toThrow(ConfigError);
    expect(() => loadConfig({ configFile, env: {}, flags: { dataDir: dir } })).toThrow(message);
  });

  it('names unnamed keys key-<8 hex of sha256> and makes every key an admin when none is marked', () => {
    expect(unnamedKeyName('secret-key-1')).toMatch(/^key-[0-9a-f]{8}$/);
    expect(unnamedKeyName('secret-key-1')).not.toBe(unnamedKeyName('secret-key-2'));
    expect(principalsOf([], ['secret-key-1'])).toEqual([{ name: unnamedKeyName('secret-key-1'), key: 'secret-key-1', admin: true, labels: {} }]);
    const mixed = principalsOf([{ name: 'ops', key: 'ops-key-0001', admin: true, labels: {} }], ['secret-key-1', 'ops-key-0001']);
    expect(mixed.map((k) => [k.name, k.admin])).toEqual([
      ['ops', true],
      [unnamedKeyName('secret-key-1'), false],
    ]);
  });
});

describe('principals of requests', () => {
  let harness: FakeHarness;
  afterEach(async () => harness?.close());

  it('acts for the key presented: named, unnamed (an admin when no key is marked) or anonymous without keys', async () => {
    harness = await fakeHarness({ apiKeys: ['legacy-key-1'] });
    const check = await harness.app.inject({ method: 'POST', url: '/policy/check', headers: { 'x-api-key': 'legacy-key-1' }, payload: { action: 'policy.reload' } });
    expect(check.json().data).toMatchObject({ decision: 'allow' });
    // An unnamed key of a server without admin markings may grant (it is an admin).
    const grant = await harness.app.inject({
      method: 'POST',
      url: '/permissions/grant',
      headers: { 'x-api-key': 'legacy-key-1' },
      payload: { principal: 'someone', action: 'sandbox.exec' },
    });
    expect(grant.json().data).toMatchObject({ granted_by: unnamedKeyName('legacy-key-1') });
    await harness.close();

    harness = await fakeHarness();
    expect((await harness.app.inject({ method: 'GET', url: '/policy/status' })).json().data).toMatchObject({ enabled: false, mode: 'enforce', default: 'allow', source: null, rule_count: 0 });
    expect((await harness.app.inject({ method: 'POST', url: '/policy/reload' })).json()).toMatchObject({
      code: 'BAD_REQUEST',
      error: 'no policy file is configured: start the server with --policy-file (or [policy].file)',
    });
    const open = await harness.app.inject({ method: 'POST', url: '/permissions/grant', payload: { principal: 'x', action: 'run' } });
    expect(open.json().data).toMatchObject({ granted_by: 'anonymous' });
  });

  it('keeps the open routes open and everything else behind a key', async () => {
    harness = await fakeHarness({ namedKeys: [{ name: 'ci', key: 'ci-key-00001', admin: false, labels: {} }] });
    expect((await harness.app.inject({ method: 'GET', url: '/status' })).statusCode).toBe(200);
    expect((await harness.app.inject({ method: 'GET', url: '/sandboxes' })).json()).toMatchObject({ code: 'UNAUTHORIZED' });
    expect((await harness.app.inject({ method: 'GET', url: '/sandboxes', headers: { authorization: 'Bearer wrong-key-1' } })).json()).toMatchObject({
      code: 'UNAUTHORIZED',
      error: 'invalid API key',
    });
    expect((await harness.app.inject({ method: 'GET', url: '/sandboxes', headers: { authorization: 'Bearer ci-key-00001' } })).statusCode).toBe(200);
  });
});
