import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ApiKey } from '../../../../src/domain/principals.js';
import type { SandboxEvent } from '../../../../src/services/events/event-bus.js';
import { fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';
import { manualClock } from '../../../helpers/manual-clock.js';

const KEYS: ApiKey[] = [
  { name: 'ops', key: 'ops-key-0001', admin: true, labels: {} },
  { name: 'ci', key: 'ci-key-00001', admin: false, labels: { team: 'a' } },
  { name: 'agent', key: 'agent-key-01', admin: false, labels: { team: 'b' } },
];
const as = (name: string) => ({ authorization: `Bearer ${KEYS.find((k) => k.name === name)!.key}` });

const NO_SUDO_FOR_CI = `
[[rules]]
id = "no-sudo-for-ci"
effect = "deny"
principals = ["ci"]
actions = ["sandbox.exec"]
when = { sudo = true }
reason = "CI keys may not sudo"
`;

/** Default-deny files let admins do everything by a rule: rules bind admins too (but for the lock-out guard). */
const DENY_BUT_ADMINS = `default = "deny"
[[rules]]
id = "admins"
effect = "allow"
when = { "principal.admin" = true }
`;

describe('policy over HTTP', () => {
  let harness: FakeHarness | undefined;
  let policyFile: string;
  afterEach(async () => {
    await harness?.close();
    harness = undefined;
  });

  /** A harness whose policy file is written first (into a folder of its own, beside the data directory). */
  async function start(rules: string, options: { mode?: 'enforce' | 'audit'; auditAllows?: boolean; allowSudoExec?: boolean; clock?: () => Date; events?: boolean } = {}) {
    const dir = (await import('node:fs')).mkdtempSync(join((await import('node:os')).tmpdir(), 'sandboxd-policy-'));
    policyFile = join(dir, 'policy.toml');
    writeFileSync(policyFile, rules);
    harness = await fakeHarness(
      {
        namedKeys: KEYS,
        allowSudoExec: options.allowSudoExec ?? true,
        policyFile,
        ...(options.mode ? { policyMode: options.mode } : {}),
        policyAuditAllows: options.auditAllows ?? false,
      },
      options.clock,
      options.events ? { enabled: true, backlog: 100, webhookUrls: [] } : undefined,
    );
    return harness;
  }
  const inject = (who: string, method: 'GET' | 'POST' | 'DELETE', url: string, payload?: object) =>
    harness!.app.inject({ method, url, headers: as(who), ...(payload ? { payload } : {}) });

  it('denies with POLICY_DENIED naming the action, resource, key, reason and rule; publishes policy.denied; audits it', async () => {
    await start(NO_SUDO_FOR_CI, { events: true });
    const events: SandboxEvent[] = [];
    harness!.services.observability.bus.subscribe(({ event }) => void events.push(event));
    expect((await inject('ci', 'POST', '/sandboxes', { name: 'build-1' })).statusCode).toBe(201);

    const denied = await inject('ci', 'POST', '/sandboxes/build-1/exec', { command: ['id'], sudo: true });
    expect(denied.statusCode).toBe(403);
    expect(denied.json()).toMatchObject({
      success: false,
      code: 'POLICY_DENIED',
      error: "policy denied sandbox.exec on sandbox:build-1 for key 'ci': CI keys may not sudo (rule no-sudo-for-ci)",
    });
    // The same request without sudo, and sudo by another key, pass.
    expect((await inject('ci', 'POST', '/sandboxes/build-1/exec', { command: ['id'] })).statusCode).toBe(200);
    expect((await inject('agent', 'POST', '/sandboxes/build-1/exec', { command: ['id'], sudo: true })).statusCode).toBe(200);

    const event = events.find((e) => e.type === 'policy.denied')!;
    expect(event).toMatchObject({
      sandbox: '',
      sandbox_uuid: '',
      resource: { kind: 'sandbox', id: 'build-1', name: 'build-1' },
      metadata: { principal: 'ci', action: 'sandbox.exec', resource: 'sandbox:build-1', rule: 'no-sudo-for-ci', mode: 'enforce' },
    });
    expect((await inject('ops', 'GET', '/policy/audit?decision=maybe')).json()).toMatchObject({ code: 'BAD_REQUEST', error: expect.stringContaining('decision') });
    expect((await inject('ops', 'GET', '/policy/audit?limit=0')).json()).toMatchObject({ code: 'BAD_REQUEST', error: expect.stringContaining('limit') });
    expect((await inject('ops', 'GET', '/policy/audit?principal=a%20b')).json()).toMatchObject({ code: 'BAD_REQUEST', error: expect.stringContaining('principal') });
    const audit = await inject('ops', 'GET', '/policy/audit?decision=deny');
    expect(audit.json().data).toEqual([
      {
        timestamp: expect.any(String),
        principal: 'ci',
        action: 'sandbox.exec',
        resource: 'sandbox:build-1',
        decision: 'deny',
        rule: 'no-sudo-for-ci',
        reason: 'CI keys may not sudo',
        mode: 'enforce',
      },
    ]);
    // Allows are not audited unless [policy].audit_allows.
    expect((await inject('ops', 'GET', '/policy/audit')).json().data).toHaveLength(1);
    expect((await inject('ops', 'GET', '/policy/audit?limit=100&decision=deny&principal=')).json().data).toHaveLength(1);
    expect((await inject('ops', 'GET', '/policy/audit?principal=agent')).json().data).toEqual([]);
    const metrics = (await inject('ops', 'GET', '/metrics')).body;
    expect(metrics).toMatch(/sandboxd_policy_decisions_total\{decision="deny"\} 1/);
    expect(metrics).toMatch(/sandboxd_policy_decisions_total\{decision="allow"\} \d+/);
  });

  it('answers a sudo exec 403 FORBIDDEN before the policy while [api].allow_sudo_exec is off, and no grant widens it', async () => {
    await start(DENY_BUT_ADMINS, { allowSudoExec: false });
    await inject('ops', 'POST', '/permissions/grant', { principal: 'ci', kind: 'sudo_exec', scope: 'session' });
    await inject('ops', 'POST', '/permissions/grant', { principal: 'ci', action: 'sandbox.create', scope: 'session' });
    expect((await inject('ci', 'POST', '/sandboxes', { name: 'build-2' })).statusCode).toBe(201);
    const refused = await inject('ci', 'POST', '/sandboxes/build-2/exec', { command: ['id'], sudo: true });
    expect(refused.statusCode).toBe(403);
    expect(refused.json()).toMatchObject({ code: 'FORBIDDEN', error: expect.stringContaining('sudo exec is disabled') });
    expect((await inject('ci', 'POST', '/run', { command: ['id'], sudo: true })).json()).toMatchObject({ code: 'FORBIDDEN' });
    expect((await inject('ops', 'GET', '/policy/audit')).json().data).toEqual([]);
  });

  it('in audit mode lets a denied request through and logs it with mode audit', async () => {
    await start(NO_SUDO_FOR_CI, { mode: 'audit', auditAllows: true });
    await inject('ci', 'POST', '/sandboxes', { name: 'build-3' });
    const passed = await inject('ci', 'POST', '/sandboxes/build-3/exec', { command: ['id'], sudo: true });
    expect(passed.statusCode).toBe(200);
    const denials = (await inject('ops', 'GET', '/policy/audit?decision=deny')).json().data;
    expect(denials).toEqual([expect.objectContaining({ principal: 'ci', decision: 'deny', rule: 'no-sudo-for-ci', mode: 'audit' })]);
    // With audit_allows, the allowed create was written too.
    const allows = (await inject('ops', 'GET', '/policy/audit?decision=allow&principal=ci')).json().data;
    expect(allows).toContainEqual(expect.objectContaining({ action: 'sandbox.create', resource: 'sandbox:build-3', decision: 'allow', rule: null }));
    expect((await inject('ops', 'GET', '/policy/status')).json().data).toMatchObject({ enabled: true, mode: 'audit' });
    expect((await inject('ops', 'GET', '/metrics')).body).toMatch(/sandboxd_policy_decisions_total\{decision="audit_deny"\} 1/);
  });

  it('keeps the old policy when a reload meets an invalid rule, and names the rule', async () => {
    await start(NO_SUDO_FOR_CI);
    const before = (await inject('ops', 'GET', '/policy/status')).json().data;
    expect(before).toMatchObject({ enabled: true, mode: 'enforce', default: 'allow', source: policyFile, rule_count: 1, last_error: null });
    expect(before.version).toMatch(/^[0-9a-f]{12}$/);

    writeFileSync(policyFile, `${NO_SUDO_FOR_CI}\n[[rules]]\nid = "broken"\neffect = "maybe"\n`);
    const failed = await inject('ops', 'POST', '/policy/reload');
    expect(failed.statusCode).toBe(400);
    expect(failed.json().error).toContain("rule 'broken' (rules[1]).effect: must be allow or deny");
    expect(failed.json().error).toContain('the previous policy stays in force');
    const after = (await inject('ops', 'GET', '/policy/status')).json().data;
    expect(after).toMatchObject({ version: before.version, rule_count: 1, last_error: expect.stringContaining("rule 'broken'") });
    await inject('ci', 'POST', '/sandboxes', { name: 'build-4' });
    expect((await inject('ci', 'POST', '/sandboxes/build-4/exec', { command: ['id'], sudo: true })).statusCode).toBe(403);

    writeFileSync(policyFile, `default = "allow"\n`);
    const good = await inject('ops', 'POST', '/policy/reload');
    expect(good.json().data).toEqual({ reloaded: true, version: expect.stringMatching(/^[0-9a-f]{12}$/), rule_count: 0 });
    expect(good.json().data.version).not.toBe(before.version);
    expect((await inject('ops', 'GET', '/policy/status')).json().data.last_error).toBeNull();
    expect((await inject('ci', 'POST', '/sandboxes/build-4/exec', { command: ['id'], sudo: true })).statusCode).toBe(200);
  });

  it('refuses to start with a rule file it cannot use, naming the rule', async () => {
    await expect(start(`[[rules]]\nid = "r1"\neffect = "allow"\nactions = "sandbox.*"\n`)).rejects.toThrow(
      /policy file .*policy\.toml: rule 'r1' \(rules\[0\]\)\.actions: must be an array of globs/,
    );
    await expect(start('rules = [')).rejects.toThrow(/is not valid TOML/);
  });

  it('keeps admins able to read the status and reload whatever the rules say (lock-out guard)', async () => {
    await start(`[[rules]]\nid = "deny-all"\neffect = "deny"\nreason = "locked"\n`);
    expect((await inject('ops', 'GET', '/sandboxes')).json()).toMatchObject({ code: 'POLICY_DENIED' });
    expect((await inject('ops', 'GET', '/policy/status')).statusCode).toBe(200);
    writeFileSync(policyFile, `default = "allow"\n`);
    expect((await inject('ops', 'POST', '/policy/reload')).statusCode).toBe(200);
    expect((await inject('ops', 'GET', '/sandboxes')).statusCode).toBe(200);
  });

  it('refuses the admin-only routes to non-admin keys with 403 FORBIDDEN, whatever the rules allow', async () => {
    await start(`[[rules]]\nid = "allow-all"\neffect = "allow"\n`);
    for (const [method, url, payload] of [
      ['POST', '/policy/reload', undefined],
      ['GET', '/policy/status', undefined],
      ['GET', '/policy/audit', undefined],
      ['POST', '/permissions/grant', { principal: 'ci', action: 'sandbox.delete' }],
      ['POST', '/permissions', { principal: 'agent', action: 'sandbox.delete' }],
      ['DELETE', '/permissions/0d7e0e0e-0000-4000-8000-000000000000', undefined],
    ] as const) {
      const response = await inject('ci', method, url, payload);
      expect(response.statusCode, `${method} ${url}`).toBe(403);
      expect(response.json().code).toBe('FORBIDDEN');
      expect(response.json().error).toMatch(/is admin-only: key 'ci' is not an admin key$/);
    }
  });

  it("keeps the proxy log to admin keys under default = \"allow\" and without a file, unless a rule or a grant allows it", async () => {
    const noFile = await fakeHarness({ namedKeys: KEYS });
    try {
      const refused = await noFile.app.inject({ method: 'GET', url: '/proxy/log', headers: as('ci') });
      expect(refused.statusCode).toBe(403);
      expect(refused.json()).toMatchObject({ code: 'FORBIDDEN', error: "proxy.log is admin-only unless a policy rule or a grant allows it: key 'ci' is not an admin key" });
      expect((await noFile.app.inject({ method: 'GET', url: '/proxy/log?sandbox=build-1', headers: as('ci') })).statusCode).toBe(403);
      expect((await noFile.app.inject({ method: 'GET', url: '/proxy/log', headers: as('ops') })).statusCode).toBe(200);
    } finally {
      await noFile.close();
    }

    await start(`default = "allow"
[[rules]]
id = "ci-reads-its-proxy-log"
effect = "allow"
principals = ["ci"]
actions = ["proxy.log"]
resources = ["sandbox:ci-*"]
`);
    expect((await inject('ci', 'GET', '/proxy/log')).json()).toMatchObject({ code: 'FORBIDDEN' });
    expect((await inject('ci', 'GET', '/proxy/log?sandbox=ci-1')).statusCode).toBe(200);
    expect((await inject('agent', 'GET', '/proxy/log?sandbox=ci-1')).statusCode).toBe(403);
    expect((await inject('ops', 'GET', '/proxy/log')).statusCode).toBe(200);
    const check = await inject('agent', 'POST', '/policy/check', { action: 'proxy.log', resource: 'sandbox:*' });
    expect(check.json().data).toMatchObject({ allowed: false, reason: 'proxy.log is admin-only unless a policy rule or a grant allows it' });
    // A grant lets one key in, where the default would not.
    expect((await inject('ops', 'POST', '/permissions/grant', { principal: 'agent', action: 'proxy.log', resource: 'sandbox:agent-*', scope: 'session' })).statusCode).toBe(201);
    expect((await inject('agent', 'GET', '/proxy/log?sandbox=agent-1')).statusCode).toBe(200);
    expect((await inject('agent', 'GET', '/proxy/log')).statusCode).toBe(403);
  });

  it('refuses a self-grant by a non-admin key, and grants nothing admin-only', async () => {
    await start(DENY_BUT_ADMINS);
    const self = await inject('agent', 'POST', '/permissions/grant', { principal: 'agent', kind: 'sandbox_create', scope: 'always' });
    expect(self.statusCode).toBe(403);
    expect((await inject('ops', 'GET', '/permissions')).json().data).toEqual([]);
    const adminOnly = await inject('ops', 'POST', '/permissions/grant', { principal: 'agent', action: 'policy.reload' });
    expect(adminOnly.json()).toMatchObject({ code: 'BAD_REQUEST', error: "action: 'policy.reload' is admin-only and cannot be granted" });
  });

  it('spends a once grant on the first request it lets through', async () => {
    await start(`${DENY_BUT_ADMINS}[[rules]]\nid = "agents-create"\neffect = "allow"\nprincipals = ["agent"]\nactions = ["sandbox.create", "sandbox.get", "permissions.list", "permissions.check"]\n`);
    await inject('agent', 'POST', '/sandboxes', { name: 'tmp-1' });
    await inject('agent', 'POST', '/sandboxes', { name: 'tmp-2' });
    expect((await inject('agent', 'DELETE', '/sandboxes/tmp-1')).json()).toMatchObject({
      code: 'POLICY_DENIED',
      error: "policy denied sandbox.delete on sandbox:tmp-1 for key 'agent': no rule allows it and the default is deny",
    });
    const granted = await inject('ops', 'POST', '/permissions/grant', { principal: 'agent', kind: 'sandbox_remove', resource: 'sandbox:tmp-*' });
    expect(granted.statusCode).toBe(201);
    const grant = granted.json().data;
    expect(grant).toEqual({
      id: expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/),
      principal: 'agent',
      action: 'sandbox.delete',
      resource: 'sandbox:tmp-*',
      scope: 'once',
      when: {},
      expires_at: null,
      uses: 0,
      granted_by: 'ops',
      granted_at: expect.any(String),
    });
    // The agent sees its own grant; the check is a dry run that spends nothing.
    expect((await inject('agent', 'GET', '/permissions')).json().data).toEqual([grant]);
    expect((await inject('agent', 'POST', '/permissions/check', { kind: 'sandbox_remove', resource: 'sandbox:tmp-1' })).json().data).toEqual({
      permitted: true,
      via: 'grant',
    });
    // A get is allowed by a rule, and leaves the grant alone.
    expect((await inject('agent', 'GET', '/sandboxes/tmp-1')).statusCode).toBe(200);
    expect((await inject('agent', 'DELETE', '/sandboxes/tmp-1')).statusCode).toBe(200);
    expect((await inject('agent', 'DELETE', '/sandboxes/tmp-2')).json().code).toBe('POLICY_DENIED');
    expect((await inject('ops', 'GET', '/permissions')).json().data).toEqual([]);
  });

  it('ends a grant at its expiry (manual clock), and a revoked grant lets nothing through', async () => {
    const time = manualClock();
    await start(`${DENY_BUT_ADMINS}[[rules]]\nid = "read"\neffect = "allow"\nactions = ["sandbox.get"]\n`, { clock: time.clock });
    const grant = (await inject('ops', 'POST', '/permissions/grant', { principal: 'ci', action: 'sandbox.create', scope: 'session', expires_in: '1m' })).json().data;
    expect(grant.expires_at).toBe('2026-01-01T00:01:00.000Z');
    expect((await inject('ci', 'POST', '/sandboxes', { name: 'exp-1' })).statusCode).toBe(201);
    expect((await inject('ci', 'POST', '/sandboxes', { name: 'exp-2' })).statusCode).toBe(201);
    time.advance(60);
    expect((await inject('ci', 'POST', '/sandboxes', { name: 'exp-3' })).json().code).toBe('POLICY_DENIED');
    expect((await inject('ops', 'GET', '/permissions')).json().data).toEqual([]);

    const always = (await inject('ops', 'POST', '/permissions', { principal: 'ci', action: 'sandbox.create', scope: 'always' })).json().data;
    expect((await inject('ci', 'POST', '/sandboxes', { name: 'exp-4' })).statusCode).toBe(201);
    expect((await inject('ops', 'GET', '/permissions')).json().data).toEqual([{ ...always, uses: 1 }]);
    expect((await inject('ops', 'DELETE', `/permissions/${always.id}`)).json().data).toBe(`permission '${always.id}' revoked`);
    expect((await inject('ops', 'DELETE', `/permissions/${always.id}`)).statusCode).toBe(404);
    expect((await inject('ci', 'POST', '/sandboxes', { name: 'exp-5' })).json().code).toBe('POLICY_DENIED');
  });

  it('never lets a grant override a deny rule', async () => {
    await start(NO_SUDO_FOR_CI);
    await inject('ops', 'POST', '/permissions/grant', { principal: 'ci', kind: 'sudo_exec', scope: 'session' });
    await inject('ci', 'POST', '/sandboxes', { name: 'build-5' });
    expect((await inject('ci', 'POST', '/sandboxes/build-5/exec', { command: ['id'], sudo: true })).json().code).toBe('POLICY_DENIED');
    expect((await inject('ci', 'POST', '/permissions/check', { kind: 'sudo_exec' })).json().data).toEqual({ permitted: false, via: 'rule' });
  });

  it('answers POST /policy/check with the decision and lets only admins ask about another principal', async () => {
    await start(NO_SUDO_FOR_CI);
    const mine = await inject('ci', 'POST', '/policy/check', { action: 'sandbox.exec', resource: 'sandbox:x', context: { sudo: true } });
    expect(mine.json().data).toEqual({
      decision: 'deny',
      allowed: false,
      reason: 'CI keys may not sudo',
      matched_rules: ['no-sudo-for-ci'],
      via: 'rule',
      evaluation_time_us: expect.any(Number),
    });
    expect((await inject('ci', 'POST', '/policy/check', { action: 'sandbox.exec', principal: 'agent' })).json()).toMatchObject({ code: 'FORBIDDEN' });
    const theirs = await inject('ops', 'POST', '/policy/check', { action: 'sandbox.exec', principal: 'ci', context: { sudo: true } });
    expect(theirs.json().data).toMatchObject({ decision: 'deny', via: 'rule' });
    expect((await inject('ops', 'POST', '/policy/check', { action: 'sandbox.exec', principal: 'agent' })).json().data).toMatchObject({
      decision: 'allow',
      via: 'default',
    });
    const bad = await inject('ops', 'POST', '/policy/check', { action: 'Sandbox Exec' });
    expect(bad.json()).toMatchObject({ code: 'BAD_REQUEST', error: expect.stringContaining('action') });
    const noAction = await inject('ops', 'POST', '/permissions/check', { resource: 'sandbox:x' });
    expect(noAction.json()).toMatchObject({ code: 'BAD_REQUEST', error: expect.stringContaining('action: give an action') });
    const badKind = await inject('ops', 'POST', '/permissions/grant', { principal: 'ci', kind: 'root' });
    expect(badKind.json()).toMatchObject({ code: 'BAD_REQUEST', error: expect.stringContaining('kind') });
    const badScope = await inject('ops', 'POST', '/permissions/grant', { principal: 'ci', action: 'sandbox.get', scope: 'forever' });
    expect(badScope.json().error).toContain('scope');
    const badExpiry = await inject('ops', 'POST', '/permissions/grant', { principal: 'ci', action: 'sandbox.get', expires_in: 'soon' });
    expect(badExpiry.json().error).toContain('expires_in');
  });

  it('decides GET /sandboxes/by-uuid/{uuid} on the sandbox name, as GET /sandboxes/{name}', async () => {
    await start(`[[rules]]\nid = "hide-prod"\neffect = "deny"\nprincipals = ["ci"]\nresources = ["sandbox:prod-*"]\nreason = "production is not for CI"\n`);
    const uuid = (await inject('ops', 'POST', '/sandboxes', { name: 'prod-db' })).json().data.uuid;
    expect((await inject('ci', 'GET', `/sandboxes/by-uuid/${uuid}`)).json()).toMatchObject({
      code: 'POLICY_DENIED',
      error: "policy denied sandbox.get on sandbox:prod-db for key 'ci': production is not for CI (rule hide-prod)",
    });
    expect((await inject('ops', 'GET', `/sandboxes/by-uuid/${uuid}`)).statusCode).toBe(200);
    // An unknown uuid is decided on the uuid, and then not found.
    expect((await inject('ci', 'GET', '/sandboxes/by-uuid/0d7e0e0e-0000-4000-8000-000000000000')).statusCode).toBe(404);
  });

  it('compares principal labels with the resource labels ($resource.labels.team)', async () => {
    await start(`${DENY_BUT_ADMINS}
[[rules]]
id = "create-own-team"
effect = "allow"
actions = ["sandbox.create"]
when = { "labels.team" = "$principal.labels.team" }
[[rules]]
id = "same-team"
effect = "allow"
actions = ["sandbox.*"]
when = { "principal.labels.team" = "$resource.labels.team" }
`);
    expect((await inject('ci', 'POST', '/sandboxes', { name: 'team-a', labels: { team: 'a' } })).statusCode).toBe(201);
    expect((await inject('ci', 'POST', '/sandboxes', { name: 'team-b', labels: { team: 'b' } })).json().code).toBe('POLICY_DENIED');
    expect((await inject('ci', 'POST', '/sandboxes/team-a/exec', { command: ['id'] })).statusCode).toBe(200);
    expect((await inject('agent', 'POST', '/sandboxes/team-a/exec', { command: ['id'] })).json()).toMatchObject({
      code: 'POLICY_DENIED',
      error: "policy denied sandbox.exec on sandbox:team-a for key 'agent': no rule allows it and the default is deny",
    });
  });
});
