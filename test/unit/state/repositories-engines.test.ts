import Sqlite from 'better-sqlite3';
import type { Kysely } from 'kysely';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ImageBuildRepository } from '../../../src/services/images/image-build-repository.js';
import { allMigrations } from '../../../src/services/domains.js';
import { AuditRepository } from '../../../src/state/audit-repository.js';
import { BrowserEventRepository } from '../../../src/state/browser-event-repository.js';
import { DetachedRepository } from '../../../src/state/detached-repository.js';
import { LlmRepository } from '../../../src/state/llm-repository.js';
import { applyMigrations } from '../../../src/state/migration-state.js';
import { CALL_LOG_SIZE, ObjectRepository, type ObjectRecord } from '../../../src/state/object-repository.js';
import { OrchestrationRepository, type InstanceRecord } from '../../../src/state/orchestration-repository.js';
import { PolicyRepository } from '../../../src/state/policy-repository.js';
import { PostgresSql, postgresKysely, postgresPool } from '../../../src/state/postgres.js';
import { ProxyRepository } from '../../../src/state/proxy-repository.js';
import { SandboxRepository, type SandboxRecord, type TransitionedStatus } from '../../../src/state/sandbox-repository.js';
import { ScheduleRepository, type RunRecord, type ScheduleRecord } from '../../../src/state/schedule-repository.js';
import type { Database } from '../../../src/state/schema.js';
import { gatedSqlite, type Sql } from '../../../src/state/sql.js';

/**
 * The repositories' own statements (the hot paths, written once for both engines) on SQLite and
 * on the machine's PostgreSQL (trust auth on 127.0.0.1:5432, a database of the test's own).
 */
const SERVER = 'postgres://postgres@127.0.0.1:5432';
const database = `sandboxd_repos_${randomBytes(4).toString('hex')}`;
const admin = new pg.Pool({ connectionString: `${SERVER}/postgres`, max: 1 });
const dir = mkdtempSync(join(tmpdir(), 'sandboxd-repos-'));
let pool: pg.Pool;
const closers: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  await admin.query(`CREATE DATABASE ${database}`);
  pool = postgresPool(`${SERVER}/${database}`);
});
afterAll(async () => {
  for (const close of closers.splice(0)) await close();
  await pool.end();
  await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  await admin.end();
  rmSync(dir, { recursive: true, force: true });
});

const engines: { name: string; open: () => Promise<{ db: Kysely<Database>; sql: Sql }> }[] = [
  {
    name: 'sqlite',
    open: async () => {
      const opened = gatedSqlite<Database>(new Sqlite(join(dir, 'state.db')));
      closers.push(() => opened.db.destroy());
      return opened;
    },
  },
  { name: 'postgres', open: async () => ({ db: postgresKysely<Database>(pool), sql: new PostgresSql(pool) }) },
];

const T0 = '2026-01-01T00:00:00.000Z';
const at = (seconds: number) => new Date(Date.parse(T0) + seconds * 1000).toISOString();

describe.each(engines)('the repositories on $name', ({ open }) => {
  let db: Kysely<Database>;
  let sql: Sql;
  beforeAll(async () => {
    ({ db, sql } = await open());
    await applyMigrations(db, allMigrations(), 'test');
  });

  it('sandboxes and their audit: a row by name and uuid, a conditional update of real columns only', async () => {
    const repo = new SandboxRepository(db, sql);
    const record: SandboxRecord = {
      uuid: 'u1', name: 'a', status: 'running', backend: 'fake', backend_id: 'c1', image: 'i', vcpus: 1, memory_mb: 256, disk_mb: null,
      profile: 'moderate', labels: { k: 'v' }, description: null, lifecycle: null, env: {}, source_url: null, source_ref: null, created_at: T0,
      updated_at: T0, last_activity_at: null, expires_at: null, archived_at: null, archived_reason: null, status_reason: null, root_image: null,
      restored_from: null, secret_mappings: null, network: null, volumes: null, internal: 0,
    };
    expect(await repo.insert(record)).toBe(true);
    expect(await repo.insert(record)).toBe(false);
    expect(await repo.byName('a')).toEqual(record);
    expect(await repo.update('u1', { status: 'stopped' as TransitionedStatus }, ['creating'])).toBe(false);
    expect(await repo.update('u1', { status: 'stopped' as TransitionedStatus, last_activity_at: at(1) }, ['running'])).toBe(true);
    expect(await repo.byUuid('u1')).toMatchObject({ status: 'stopped', last_activity_at: at(1) });
    await expect(repo.update('u1', { bogus: 1 } as never)).rejects.toThrow("unknown column 'bogus'");
    const audit = new AuditRepository(db, sql);
    await audit.append({ timestamp: at(2), event: 'command_executed', sandbox: 'a', sandbox_uuid: 'u1', details: { exit_code: 0 } });
    expect(await audit.forSandbox('u1')).toEqual([{ timestamp: at(2), event: 'command_executed', sandbox: 'a', exit_code: 0 }]);
  });

  it('proxy hooks, secrets (replaced by name), decisions (ids that grow) and the CA (the first kept wins)', async () => {
    const repo = new ProxyRepository(sql);
    const hook = { name: 'h', event: 'on_request', match: '{}', target: '{"type":"block"}', created_at: T0 };
    expect(await repo.insertHook(hook)).toBe(true);
    expect(await repo.insertHook(hook)).toBe(false);
    expect(await repo.hooks()).toEqual([hook]);
    expect(await repo.deleteHook('h')).toBe(true);
    const secret = { sandbox_uuid: 'u1', name: 'TOKEN', host: 'api.test', placeholder: 'p', secret: 'v1.sealed', intercept_tls: 0 };
    await repo.putSecrets([secret]);
    await repo.putSecrets([{ ...secret, secret: 'v1.again' }]);
    expect(await repo.secrets('u1')).toEqual([{ ...secret, secret: 'v1.again' }]);
    const first = await repo.addDecision('a', '{"n":1}');
    const second = await repo.addDecision('b', '{"n":2}');
    expect(second).toBeGreaterThan(first);
    expect(await repo.decisions(10)).toEqual(['{"n":2}', '{"n":1}']);
    await repo.pruneDecisions(first);
    expect(await repo.decisions(10, 'a')).toEqual([]);
    await repo.putEgressCa({ cert: 'c1', key: 'k1', created_at: T0 });
    await repo.putEgressCa({ cert: 'c2', key: 'k2', created_at: T0 });
    expect(await repo.egressCa()).toEqual({ cert: 'c1', key: 'k1' });
  });

  it('the policy audit ring and kept grants; image builds newest first', async () => {
    const policy = new PolicyRepository(db, sql);
    for (let i = 0; i < 3; i++) {
      await policy.appendAudit({ timestamp: at(i), principal: 'ci', action: 'run', resource: `run:${i}`, decision: 'deny', rule: null, reason: 'r', mode: 'enforce' });
    }
    expect((await policy.audit({ limit: 10 })).map((row) => row.resource)).toEqual(['run:2', 'run:1', 'run:0']);
    await policy.insertPermission({ id: 'g1', principal: 'ci', action: 'run', resource: '*', conditions: '{}', expires_at: null, uses: 0, granted_by: 'ops', granted_at: T0 });
    await policy.countUse('g1');
    expect(await policy.permissions()).toMatchObject([{ id: 'g1', uses: 1 }]);
    await policy.deletePermission('g1');
    expect(await policy.permissions()).toEqual([]);

    const builds = new ImageBuildRepository(sql);
    await builds.start({ id: '0190-a', name: 'one', started_at: at(1) });
    await builds.start({ id: '0190-b', name: 'two', started_at: at(1) });
    await builds.finish('0190-a', { status: 'failed', error: 'no', at: at(2) });
    expect((await builds.list()).map((row) => row.id)).toEqual(['0190-b', '0190-a']);
    expect((await builds.running()).map((row) => row.id)).toEqual(['0190-b']);
  });

  it('a schedule claim that one of two racing claims wins, and a run that ends once', async () => {
    const repo = new ScheduleRepository(db, sql);
    const schedule: ScheduleRecord = {
      id: 's1', name: 'tick', cron: '* * * * *', fire_at: null, timezone: 'UTC', method: 'run', args: { command: ['true'] }, target_class: null,
      target_object_id: null, target_orchestration: null, target_sandbox: null, status: 'active', overlap: 'skip', misfire: 'fire_once',
      end_at: null, next_fire_at: at(60), last_fired_at: null, last_run_status: null, fire_count: 0, trigger_count: 0, created_at: T0, updated_at: T0,
    };
    await repo.insert(schedule);
    expect(await repo.count()).toBe(1);
    expect(await repo.nextDue()).toBe(at(60));
    expect((await repo.due(at(60), 10)).map((s) => s.id)).toEqual(['s1']);
    const run: RunRecord = {
      id: 'r1', schedule_id: 's1', scheduled_for: at(60), started_at: at(60), finished_at: null, status: 'running', missed_count: 0, duration_ms: null,
      result: null, error: null, orchestration_id: null, attempt: 1, manual: 0,
    };
    const plan = (running: boolean) => ({
      update: { next_fire_at: at(120), status: 'active' as const, last_fired_at: at(60), fire_count_increment: 1, updated_at: at(60) },
      runs: running ? [] : [run],
    });
    const claims = await Promise.all([repo.claim('s1', at(60), plan), repo.claim('s1', at(60), plan)]);
    expect(claims.map((runs) => runs.length).sort()).toEqual([0, 1]);
    expect(await repo.runningRuns()).toMatchObject([{ id: 'r1' }]);
    const end = { status: 'succeeded' as const, finished_at: at(61), duration_ms: 1000, result: { ok: true }, error: null };
    expect(await repo.finishRun(run, end, () => undefined)).toBe(true);
    expect(await repo.finishRun(run, end, () => undefined)).toBe(false);
    expect(await repo.byId('s1')).toMatchObject({ next_fire_at: at(120), fire_count: 1, last_run_status: 'succeeded' });
    await repo.delete('s1');
    expect(await repo.count()).toBe(0);
  });

  it('an orchestration transition commits its events, tasks, timers and status together', async () => {
    const repo = new OrchestrationRepository(sql);
    await repo.saveDefinition({ name: 'd', version: 1, content: { steps: [] }, hash: 'h1', created_at: T0, updated_at: T0 });
    await repo.saveDefinition({ name: 'd', version: 2, content: { steps: [1] }, hash: 'h2', created_at: T0, updated_at: at(1) });
    expect(await repo.definition('d')).toMatchObject({ version: 2, content: { steps: [1] } });
    const record: InstanceRecord = {
      id: 'o1', name: 'd', definition_version: 2, definition: {}, status: 'pending', input: { n: 1 }, output: null, error: null, failed_step: null,
      caller_key: 'key-1', start_at: null, created_at: T0, updated_at: T0, started_at: null, completed_at: null,
    };
    const started = { sequence: 1, type: 'OrchestratorStarted', step: null, data: { input: { n: 1 } }, timestamp: T0 };
    await repo.create(record, [started], { status: 'running', tasks: [{ step: 'a', attempt: 1, state: 'scheduled', command: { run: 1 } }], timers: [{ step: 't', fire_at: at(30) }], updated_at: T0 });
    await expect(repo.create(record, [], { status: 'pending', tasks: [], timers: [], updated_at: T0 })).rejects.toThrow(/unique|constraint/i);
    expect(await repo.byCallerKey('key-1')).toMatchObject({ id: 'o1', status: 'running' });
    expect(await repo.tasks('o1')).toMatchObject([{ step: 'a', state: 'scheduled', command: { run: 1 } }]);
    expect(await repo.nextDue(86_400_000)).toBe(at(30));
    const done = { sequence: 2, type: 'OrchestratorCompleted', step: null, data: { output: 7 }, timestamp: at(5) };
    await repo.commit('o1', [done], { status: 'completed', tasks: [], timers: [], updated_at: at(5), fields: { output: 7, completed_at: at(5) } });
    expect(await repo.lastSequence('o1')).toBe(2);
    expect((await repo.history('o1')).map((event) => event.type)).toEqual(['OrchestratorStarted', 'OrchestratorCompleted']);
    expect(await repo.instance('o1')).toMatchObject({ status: 'completed', output: 7 });
    expect(await repo.expired(at(6), 10)).toEqual(['o1']);
    await repo.deleteInstance('o1');
    expect(await repo.instance('o1')).toBeUndefined();
  });

  it("an object call's commit: storage, count, call log of the newest calls, idempotency kept once", async () => {
    const repo = new ObjectRepository(db, sql);
    await repo.putClass({
      name: 'counter', runtime: 'node', source: 'x', handlers: null, image: 'i', profile: 'moderate', vcpus: 1, memory_mb: 256, timeout_ms: 1000,
      idle_timeout_seconds: 60, max_storage_bytes: 1000, setup: null, methods: ['inc'], version: 1, sha256: 'h', created_at: T0, updated_at: T0,
    });
    expect(await repo.getClass('counter')).toMatchObject({ methods: ['inc'] });
    const object: ObjectRecord = {
      id: 'ob1', class: 'counter', object_id: 'one', status: 'active', sandbox: 'sb', sandbox_managed: 1, storage: {}, storage_bytes: 2,
      idle_timeout_seconds: 60, alarm_at: null, alarm_method: null, alarm_args: null, alarm_attempts: 0, alarm_retry_at: null,
      last_alarm_error: null, last_call_at: null, call_count: 0, created_at: T0, updated_at: T0, uid_number: null,
    };
    // Each object gets its own uid number, the highest plus one, also when several are made at once.
    const others = ['two', 'three', 'four'].map((name, n) => ({ ...object, id: `ob${n + 2}`, object_id: name }));
    expect(await Promise.all([repo.insert(object), ...others.map((other) => repo.insert(other))])).toEqual([true, true, true, true]);
    expect(await repo.insert({ ...object, id: 'again' })).toBe(false);
    const numbers = await Promise.all(['ob1', 'ob2', 'ob3', 'ob4'].map((id) => repo.rowNumber(id)));
    expect([...numbers].sort()).toEqual([1, 2, 3, 4]);
    const call = (n: number) => ({
      call_id: `0190-${String(n).padStart(4, '0')}`, object: 'ob1', method: 'inc', source: 'api', started_at: at(n), duration_ms: 1, outcome: 'ok' as const,
      error: null, cold_start: 0, idempotency_key: null,
    });
    for (let n = 0; n < CALL_LOG_SIZE + 3; n++) {
      await repo.commit({ object: 'ob1', now: at(n), storage: { value: { count: n }, bytes: 11 }, call: call(n), ...(n === 0 ? { idempotency: { key: 'k', result: '1', request_hash: 'r' } } : {}) });
    }
    await repo.commit({ object: 'ob1', now: at(200), call: call(200), idempotency: { key: 'k', result: '2', request_hash: 'r' } });
    expect(await repo.byName('counter', 'one')).toMatchObject({ storage: { count: CALL_LOG_SIZE + 2 }, call_count: CALL_LOG_SIZE + 4, last_call_at: at(200) });
    const calls = await repo.calls('ob1', 1000);
    expect(calls).toHaveLength(CALL_LOG_SIZE);
    expect(calls[0]?.call_id).toBe('0190-0200');
    expect(await repo.idempotent('ob1', 'k', T0)).toEqual({ result: '1', request_hash: 'r' });
  });

  it("LLM usage added up per day and model, budgets, browser events numbered per sandbox, a detached command's end kept once", async () => {
    const llm = new LlmRepository(db);
    const delta = { day: '2026-01-01', sandbox_uuid: 'u1', sandbox: 'a', provider: 'openai', model: 'm', requests: 1, input_tokens: 2 ** 33, output_tokens: 5, errors: 0, unmetered_requests: 0 };
    await llm.addUsage(delta);
    await llm.addUsage({ ...delta, input_tokens: 10 });
    const range = { since: '2026-01-01', until: '2026-01-31' };
    expect(await llm.totals(range)).toEqual({ requests: 2, input_tokens: 2 ** 33 + 10, output_tokens: 10, errors: 0, unmetered_requests: 0 });
    expect(await llm.byModel(range)).toMatchObject([{ provider: 'openai', model: 'm', requests: 2 }]);
    expect(await llm.tokensUsed('u1')).toBe(2 ** 33 + 20);
    await llm.setBudget('u1', 100);
    await llm.setBudget('u1', 200);
    expect(await llm.budget('u1')).toBe(200);

    const browser = new BrowserEventRepository(db);
    await Promise.all([0, 1, 2].map((n) => browser.append('u1', { type: 'click', page: `p${n}`, ts: at(n) })));
    expect((await browser.list('u1', 0, 10)).map((event) => event.seq)).toEqual([0, 1, 2]);

    const detached = new DetachedRepository(db);
    await detached.insert({ id: 'd1', sandbox_uuid: 'u1', process_id: 'p1', pid: 7, command: ['sleep', '1'], started_at: T0, status: null, exit_code: null, finished_at: null });
    const end = { status: 'completed' as const, exit_code: 0, finished_at: at(1) };
    const output = { stdout: { content: Buffer.from('out\n'), start: 0 } };
    expect(await detached.finish('d1', end, output)).toBe(true);
    expect(await detached.finish('d1', end, output)).toBe(false);
    expect((await detached.output('d1', 'stdout')).content.toString()).toBe('out\n');
  });
});
