import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Principal } from '../../../../src/domain/principals.js';
import { PermissionService } from '../../../../src/services/governance/index.js';
import { factsOf } from '../../../../src/services/governance/policy-rules.js';
import { AUDIT_RING_SIZE, PolicyRepository } from '../../../../src/state/policy-repository.js';
import { openStore, type Store } from '../../../../src/state/store.js';
import { codeOf } from '../../../helpers/fake-app.js';
import { manualClock } from '../../../helpers/manual-clock.js';
import type { Clock } from '../../../../src/services/support/clock.js';
import { silentLogger } from '../../../../src/telemetry/logger.js';

const ops: Principal = { name: 'ops', admin: true, labels: {} };
const ci: Principal = { name: 'ci', admin: false, labels: {} };

describe('permission grants and the audit ring in SQLite', () => {
  let dataDir: string;
  let store: Store;
  beforeEach(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'sandboxd-grants-'));
    store = await openStore(dataDir);
  });
  afterEach(async () => {
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  /** A permission service over the store, once it has read the kept grants (as the server waits for before serving). */
  const permissionsOver = async (clock: Clock, repo = new PolicyRepository(store.db, store.sql)) => {
    const service = new PermissionService({ clock, logger: silentLogger(), repo });
    await service.ready;
    return service;
  };
  const request = (action: string, resource: string, context = {}) => ({ principal: 'ci', action, resource, facts: factsOf(context, ci) });

  it('keeps always grants (and their uses) across a restart, and ends once and session grants with the process', async () => {
    const time = manualClock();
    const first = await permissionsOver(time.clock);
    const always = await first.grant(ops, { principal: 'ci', action: 'sandbox.delete', resource: 'sandbox:tmp-*', scope: 'always' });
    await first.grant(ops, { principal: 'ci', kind: 'sudo_exec', scope: 'session' });
    await first.grant(ops, { principal: 'ci', action: 'run' });
    expect(first.use(request('sandbox.delete', 'sandbox:tmp-1'), true)).toMatchObject({ id: always.id, uses: 1 });
    expect(first.use(request('sandbox.delete', 'sandbox:prod'), true)).toBeUndefined();

    const second = await permissionsOver(time.clock);
    expect(second.list(ops)).toEqual([{ ...always, uses: 1 }]);
    expect(second.use(request('sandbox.exec', 'sandbox:x', { sudo: true }), false)).toBeUndefined();
  });

  it('matches a kind grant only on the context it implies, and a dry run spends nothing', async () => {
    const permissions = await permissionsOver(manualClock().clock);
    await permissions.grant(ops, { principal: 'ci', kind: 'sudo_exec' });
    expect(permissions.use(request('sandbox.exec', 'sandbox:x', { sudo: false }), true)).toBeUndefined();
    expect(permissions.use(request('sandbox.exec', 'sandbox:x', { sudo: true }), false)).toMatchObject({ scope: 'once', uses: 0 });
    expect(permissions.use(request('sandbox.exec', 'sandbox:x', { sudo: true }), true)).toMatchObject({ scope: 'once', uses: 1 });
    expect(permissions.use(request('sandbox.exec', 'sandbox:x', { sudo: true }), true)).toBeUndefined();
  });

  it('drops an expired always grant from the list and the table', async () => {
    const time = manualClock();
    const repo = new PolicyRepository(store.db, store.sql);
    const permissions = await permissionsOver(time.clock, repo);
    await permissions.grant(ops, { principal: 'ci', action: 'run', scope: 'always', expires_in: '2h' });
    time.advance(2 * 3600 - 1);
    expect(permissions.use(request('run', 'run:*'), false)).toBeDefined();
    time.advance(1);
    expect(permissions.use(request('run', 'run:*'), false)).toBeUndefined();
    expect(permissions.list(ops)).toEqual([]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(await repo.permissions()).toEqual([]);
  });

  it('refuses grants from non-admins, contradictory kinds and admin-only actions, naming the field', async () => {
    const permissions = await permissionsOver(manualClock().clock);
    expect(await codeOf(permissions.grant(ci, { principal: 'ci', action: 'run' }))).toBe('FORBIDDEN');
    await expect(permissions.grant(ops, { principal: 'ci', action: 'run', kind: 'sudo_exec' })).rejects.toThrow(
      "action: 'run' contradicts kind 'sudo_exec' (which means sandbox.exec)",
    );
    await expect(permissions.grant(ops, { principal: 'ci', action: 'permissions.grant' })).rejects.toThrow('is admin-only and cannot be granted');
    await expect(permissions.grant(ops, { principal: 'ci' })).rejects.toThrow('action: give an action');
    expect(() => permissions.revoke(ops, 'missing')).toThrow("permission 'missing' not found");
  });

  it('keeps the newest 10,000 decisions in the audit ring', async () => {
    const repo = new PolicyRepository(store.db, store.sql);
    const row = (i: number) => ({
      timestamp: new Date(i * 1000).toISOString(),
      principal: 'ci',
      action: 'run',
      resource: `run:${i}`,
      decision: 'deny' as const,
      rule: null,
      reason: 'r',
      mode: 'enforce' as const,
    });
    for (let i = 0; i < AUDIT_RING_SIZE + 5; i++) await repo.appendAudit(row(i));
    const kept = await repo.audit({ limit: 20_000 });
    expect(kept).toHaveLength(AUDIT_RING_SIZE);
    expect(kept[0]!.resource).toBe(`run:${AUDIT_RING_SIZE + 4}`);
    expect(kept.at(-1)!.resource).toBe('run:5');
  });
});
