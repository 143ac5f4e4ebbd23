import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../../../../src/config/load-config.js';
import { ServiceError, UnsupportedError } from '../../../../src/errors.js';
import { MAX_ON_DEMAND_KEYS } from '../../../../src/services/pools/index.js';
import { IDLE_INSTANCE_MB } from '../../../../src/services/pools/keyed-pool.js';
import { fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';
import { manualClock } from '../../../helpers/manual-clock.js';

let h: FakeHarness;
afterEach(async () => h?.close());

const BASE = 'sandboxd/base:bookworm';
const PYTHON = 'sandboxd/python:bookworm';

/** Pool instances the fake backend holds, by key. */
function pooled(harness: FakeHarness, image = BASE, profile = 'moderate'): string[] {
  return [...harness.backend.instances.values()]
    .filter((i) => i.state.role === 'pool' && i.state.name.startsWith('pool-') && i.spec.image === image && i.spec.profile === profile)
    .map((i) => i.state.id);
}

async function warmed(settings: Parameters<typeof fakeHarness>[0] = {}, clock?: Parameters<typeof fakeHarness>[1]): Promise<FakeHarness> {
  const harness = await fakeHarness({ poolSize: 2, ...settings }, clock);
  harness.backend.images.add(PYTHON);
  harness.services.pool.warm();
  await harness.services.pool.settled();
  return harness;
}

describe('WarmPool', () => {
  it('warms the default image at start, and the configured keys with their own sizes', async () => {
    h = await warmed({ poolSizes: [{ image: PYTHON, profile: 'restrictive', size: 3 }] });
    expect(pooled(h)).toHaveLength(2);
    expect(pooled(h, PYTHON, 'restrictive')).toHaveLength(3);
    expect(h.services.pool.size).toBe(5);
    const spec = [...h.backend.instances.values()][0]!.spec;
    expect(spec).toMatchObject({ vcpus: 1, memory_mb: 512, env: {}, role: 'pool' });
  });

  it('hands each instance out once and starts a replacement', async () => {
    h = await warmed();
    const first = h.services.pool.takeReady({ image: BASE, profile: 'moderate' });
    const second = h.services.pool.takeReady({ image: BASE, profile: 'moderate' });
    expect(first && second && first.state.id !== second.state.id).toBe(true);
    expect(h.services.pool.takeReady({ image: BASE, profile: 'moderate' })).toBeUndefined();
    await h.services.pool.settled();
    // Three takes at once are a burst of three: three are made ready for the next.
    expect(h.services.pool.size).toBe(3);
    expect(pooled(h)).toHaveLength(5);
    h.services.pool.discard(first!);
    h.services.pool.discard(second!);
    await h.services.pool.settled();
    expect(pooled(h)).toHaveLength(3);
  });

  it('makes an instance for its taker when none is ready (a cold start), and fills the new key meanwhile', async () => {
    h = await warmed();
    const taken = h.services.pool.take({ image: PYTHON, profile: 'moderate' });
    expect(taken.warm).toBe(false);
    const instance = await taken.instance;
    expect(instance.name).toBe(taken.name);
    await h.services.pool.settled();
    expect(pooled(h, PYTHON)).toHaveLength(3);
    expect(h.services.pool.take({ image: PYTHON, profile: 'moderate' }).warm).toBe(true);
  });

  it('a key whose image cannot be had waits before it tries again; its taker gets the error', async () => {
    h = await warmed();
    const taken = h.services.pool.take({ image: 'nowhere/image:1', profile: 'moderate' });
    await expect(taken.instance).rejects.toMatchObject({ code: 'IMAGE_UNAVAILABLE' });
    await h.services.pool.settled();
    const attempts = h.backend.calls.filter((c) => c.op === 'create').length;
    h.services.pool.takeReady({ image: 'nowhere/image:1', profile: 'moderate' });
    await h.services.pool.settled();
    expect(h.backend.calls.filter((c) => c.op === 'create').length).toBe(attempts);
  });

  it('empties the pools of keys no one took from for ten minutes, but never the default one', async () => {
    const clock = manualClock();
    h = await warmed({}, clock.clock);
    h.services.pool.takeReady({ image: PYTHON, profile: 'moderate' });
    await h.services.pool.settled();
    expect(pooled(h, PYTHON)).toHaveLength(2);
    clock.advance(9 * 60);
    h.services.pool.evictIdle();
    expect(pooled(h, PYTHON)).toHaveLength(2);
    clock.advance(2 * 60);
    h.services.pool.evictIdle();
    await h.services.pool.settled();
    expect(pooled(h, PYTHON)).toHaveLength(0);
    expect(pooled(h)).toHaveLength(2);
  });

  it('removes every instance at close, also one still being made', async () => {
    h = await warmed();
    h.services.pool.takeReady({ image: PYTHON, profile: 'moderate' });
    await h.services.pool.close();
    expect(h.backend.instances.size).toBe(0);
  });

  it('grows with the recent rate of takes, within the memory budget, and shrinks back once idle', async () => {
    const clock = manualClock();
    h = await warmed({}, clock.clock);
    const key = { image: BASE, profile: 'moderate' } as const;
    // 18 takes within the minute, 3 s apart (no burst): 2 configured + 18 / 6 for the demand.
    for (let i = 0; i < 18; i++) {
      const taken = h.services.pool.takeReady(key);
      if (taken) h.services.pool.discard(taken);
      await h.services.pool.settled();
      clock.advance(i < 17 ? 3 : 0);
    }
    expect(h.services.pool.target(key)).toBe(5);
    expect(pooled(h)).toHaveLength(5);
    // The takes age out of the window: the rate's extra instances go back; the largest burst
    // (four takes within 10 s) is kept for ten minutes, then the configured size alone.
    clock.advance(61);
    h.services.pool.evictIdle();
    await h.services.pool.settled();
    expect(h.services.pool.target(key)).toBe(4);
    expect(pooled(h)).toHaveLength(4);
    clock.advance(10 * 60);
    h.services.pool.evictIdle();
    await h.services.pool.settled();
    expect(h.services.pool.target(key)).toBe(2);
    expect(pooled(h)).toHaveLength(2);
  });

  it('learns a burst: after 50 takes at once it keeps 50 ready for the next, and gives them back ten minutes on', async () => {
    const clock = manualClock();
    h = await warmed({}, clock.clock);
    const key = { image: BASE, profile: 'moderate' } as const;
    const burst = async () => {
      const taken = Array.from({ length: 50 }, () => h.services.pool.take(key));
      for (const instance of await Promise.all(taken.map((t) => t.instance))) h.services.pool.discard(instance);
      await h.services.pool.settled();
      return taken.filter((t) => t.warm).length;
    };
    expect(await burst()).toBe(2);
    expect(h.services.pool.target(key)).toBe(50);
    expect(pooled(h)).toHaveLength(50);
    clock.advance(20);
    expect(await burst()).toBe(50);
    // Another burst within the memory renews it; ten minutes without one give the instances back.
    clock.advance(9 * 60);
    h.services.pool.evictIdle();
    expect(h.services.pool.target(key)).toBe(50);
    clock.advance(61);
    h.services.pool.evictIdle();
    await h.services.pool.settled();
    expect(h.services.pool.target(key)).toBe(2);
    expect(pooled(h)).toHaveLength(2);
  });

  it("makes a taken instance's replacement only after the taker's first commands have had the engine (100 ms)", async () => {
    h = await warmed({ poolSize: 1 });
    const key = { image: PYTHON, profile: 'moderate' } as const;
    h.services.pool.take(key);
    await h.services.pool.settled();
    const creates: number[] = [];
    const create = h.backend.create.bind(h.backend);
    h.backend.create = async (spec) => {
      creates.push(performance.now());
      return create(spec);
    };
    const taken = performance.now();
    expect(h.services.pool.takeReady(key)).toBeDefined();
    await new Promise((resolve) => setImmediate(resolve));
    expect(creates).toEqual([]);
    await h.services.pool.settled();
    expect(creates).toHaveLength(1);
    expect((creates[0] ?? 0) - taken).toBeGreaterThanOrEqual(99);
  });

  it.each(['a fast run', 'a sandbox create'])('makes nothing ahead of demand while a taker waits for an instance made for it (%s)', async (taker) => {
    h = await warmed({ poolSize: 1 });
    const key = { image: PYTHON, profile: 'moderate' } as const;
    h.services.pool.take(key);
    await h.services.pool.settled();
    const create = h.backend.create.bind(h.backend);
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const creates: string[] = [];
    h.backend.create = async (spec) => {
      creates.push(spec.name);
      await gate;
      return create(spec);
    };
    const take = (name: string) => (taker === 'a fast run' ? h.services.pool.take(key).instance : h.services.sandboxes.create({ name, image: PYTHON }));
    // The ready instance goes, and its replacement is due 100 ms later (after the taker's first
    // commands); the second taker finds none ready and waits for one made for it, while the pool
    // makes none, also once the replacement is due.
    const first = take('first');
    const second = take('second');
    try {
      await vi.waitFor(() => expect(creates).toHaveLength(1));
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(creates).toHaveLength(1);
    } finally {
      // Also when a check failed: close would wait for the held creates.
      release();
    }
    await Promise.all([first, second]);
    await h.services.pool.settled();
    // Two taken at once: two are kept ready for the next.
    expect(h.services.pool.target(key)).toBe(2);
    expect(creates).toHaveLength(3);
  });

  it('counts an idle instance at its idle cost against the memory budget, and grows no further than that allows, but always keeps the configured size', async () => {
    h = await warmed({ poolMemoryMb: 3 * IDLE_INSTANCE_MB });
    const key = { image: BASE, profile: 'moderate' } as const;
    for (let i = 0; i < 60; i++) {
      const taken = h.services.pool.takeReady(key);
      if (taken) h.services.pool.discard(taken);
      await h.services.pool.settled();
    }
    expect(pooled(h)).toHaveLength(3);
    await h.close();
    h = await warmed({ poolMemoryMb: 0 });
    expect(pooled(h)).toHaveLength(2);
  });

  it('makes nothing ahead of demand with size 0', async () => {
    h = await warmed({ poolSize: 0 });
    expect(h.backend.instances.size).toBe(0);
    expect(h.services.pool.take({ image: BASE, profile: 'moderate' }).warm).toBe(false);
  });
});

describe('fast runs', () => {
  it('run in a warm instance, skip to executing, and destroy it afterwards', async () => {
    h = await warmed();
    const stages: string[] = [];
    let started = '';
    const result = await h.services.runs.run({ command: ['echo', 'hi'] }, { onStarted: (name) => (started = name), onStage: (stage) => stages.push(stage) });
    expect(result).toMatchObject({ output: 'echo hi\n', exit_code: 0 });
    expect(started).toMatch(/^pool-[0-9a-f]{12}$/);
    expect(stages).toEqual(['executing']);
    await h.services.pool.settled();
    expect([...h.backend.instances.values()].map((i) => i.state.name)).not.toContain(started);
    expect(pooled(h)).toHaveLength(2);
    expect(await h.services.sandboxes.list()).toEqual([]);
  });

  it('honour image and profile, with a cold start for a key not yet warm', async () => {
    h = await warmed();
    let seen: unknown;
    h.backend.onExec = (request, spec) => {
      seen = spec;
      return { chunks: [{ stream: 'stdout', text: 'ok\n' }] };
    };
    const stages: string[] = [];
    await h.services.runs.run({ command: ['python3', '-V'], profile: 'restrictive' }, { onStage: (stage) => stages.push(stage) });
    expect(seen).toMatchObject({ image: PYTHON, profile: 'restrictive', role: 'pool' });
    expect(stages).toEqual(['creating', 'starting', 'executing']);
  });

  it('take another instance when a warm one died while it waited', async () => {
    h = await warmed();
    for (const id of pooled(h)) h.backend.instances.get(id)!.state.status = 'stopped';
    const result = await h.services.runs.run({ command: ['true'] });
    expect(result.exit_code).toBe(0);
    await h.services.pool.settled();
    expect(h.backend.calls.filter((c) => c.op === 'exec')).toHaveLength(3);
  });

  it('destroy the instance when the command cannot run', async () => {
    h = await warmed();
    h.backend.failNext('exec', new ServiceError('INTERNAL', 'engine exploded'));
    await expect(h.services.runs.run({ command: ['true'] })).rejects.toThrow('engine exploded');
    await h.services.pool.settled();
    expect(pooled(h)).toHaveLength(2);
    expect(h.backend.instances.size).toBe(2);
  });

  it('fast: false makes a sandbox of its own, not from the pool', async () => {
    h = await warmed();
    let seen: { name: string; role?: string } | undefined;
    h.backend.onExec = (_request, spec) => {
      seen = spec;
      return {};
    };
    await h.services.runs.run({ command: ['true'], fast: false });
    expect(seen?.name).toMatch(/^run-[0-9a-f]{12}$/);
    expect(seen?.role).toBeUndefined();
    expect(pooled(h)).toHaveLength(2);
  });

  it('POST /run refuses a fast that is no boolean', async () => {
    h = await warmed();
    const res = await h.app.inject({ method: 'POST', url: '/run', payload: { command: ['true'], fast: 'yes' } });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatch(/fast/);
  });
});

describe('creating a sandbox from the pool', () => {
  it('claims a ready instance: its name, limits and labels, and the env with every command', async () => {
    h = await warmed();
    const [first] = pooled(h);
    const seen: Record<string, string>[] = [];
    h.backend.onExec = (request) => {
      seen.push(request.env ?? {});
      return {};
    };
    const created = await h.services.sandboxes.create({ name: 'claimed', vcpus: 2, memory_mb: 1024, labels: { team: 'a' }, env: { A: '1', B: '2' } });
    expect(created).toMatchObject({ name: 'claimed', status: 'running', vcpus: 2, memory_mb: 1024, labels: { team: 'a' } });
    expect(h.backend.instances.get(first!)!.spec).toMatchObject({ name: 'claimed', vcpus: 2, memory_mb: 1024, uuid: created.uuid });
    await h.services.exec.exec('claimed', { command: ['env'], env: { B: 'request' } });
    expect(seen).toEqual([{ A: '1', B: 'request' }]);
    const logs = await h.services.logs('claimed');
    expect(logs[0]).toMatchObject({ event: 'sandbox_created', pooled: true });
    await h.services.pool.settled();
    expect(pooled(h)).toHaveLength(2);
  });

  it('does not use the pool for a source, a snapshot, another image than the ready ones, or a taken name', async () => {
    h = await warmed();
    await h.services.sandboxes.create({ name: 'one' });
    await h.services.pool.settled();
    const roleOf = async (name: string) => h.backend.instances.get((await h.services.sandboxes.require(name)).backend_id!)!.state.role;
    await expect(h.services.sandboxes.create({ name: 'one' })).rejects.toMatchObject({ code: 'CONFLICT' });
    expect(h.services.pool.size).toBe(2);
    await h.services.sandboxes.create({ name: 'py', image: PYTHON });
    expect(await roleOf('py')).toBe('sandbox');
    // ...while the new key's pool fills for the next one.
    await h.services.pool.settled();
    expect(pooled(h, PYTHON)).toHaveLength(2);
    await h.services.sandboxes.create({ name: 'src', source_url: 'https://example.com/repo.git' });
    expect(await roleOf('src')).toBe('sandbox');
    await h.services.snapshots.create({ sandbox: 'one', name: 'snap' });
    const restored = await h.services.snapshots.restore('snap');
    expect(await roleOf(restored.name)).toBe('sandbox');
    expect(pooled(h)).toHaveLength(2);
  });

  it('creates the usual way when the ready instance is gone, and puts it back when its limits cannot change', async () => {
    h = await warmed();
    for (const id of pooled(h)) h.backend.instances.get(id)!.state.status = 'stopped';
    const created = await h.services.sandboxes.create({ name: 'cold' });
    expect(h.backend.instances.get((await h.services.sandboxes.require('cold')).backend_id!)!.state.role).toBe('sandbox');
    expect(created.status).toBe('running');
    await h.services.pool.settled();

    h.backend.failNext('claim', new UnsupportedError('fake', 'changing the limits of a pooled sandbox'));
    const ready = h.services.pool.size;
    await h.services.sandboxes.create({ name: 'big', memory_mb: 2048 });
    expect(h.services.pool.size).toBeGreaterThanOrEqual(ready);
  });

  it('gives the instance back to no one when the sandbox limit is reached', async () => {
    h = await warmed({ maxSandboxes: 1 });
    await h.services.sandboxes.create({ name: 'a' });
    await expect(h.services.sandboxes.create({ name: 'b' })).rejects.toMatchObject({ code: 'LIMIT_REACHED' });
    await h.services.pool.settled();
    expect(await h.services.sandboxes.list()).toHaveLength(1);
    expect(pooled(h)).toHaveLength(2);
    expect(h.backend.instances.size).toBe(3);
  });

  it('survives recovery, while unclaimed pool instances are reaped', async () => {
    h = await warmed();
    await h.services.sandboxes.create({ name: 'kept' });
    await h.services.pool.settled();
    const report = await h.services.recovery.reconcile();
    expect(report.orphansRemoved).toBe(2);
    expect(report.lost).toEqual([]);
    expect((await h.services.sandboxes.get('kept')).status).toBe('running');
  });
});

describe('sweeping containers no one owns', () => {
  it('removes old unknown containers, never a sandbox, the pool\'s own, a young one or a helper', async () => {
    h = await warmed();
    await h.services.sandboxes.create({ name: 'kept' });
    await h.services.pool.settled();
    const make = (role: 'pool' | 'sandbox' | 'helper') =>
      h.backend.create({ name: `stray-${role}`, uuid: `stray-${role}-${Math.random()}`, image: BASE, profile: 'moderate', vcpus: 1, memory_mb: 512, env: {}, role });
    const strays = [await make('pool'), await make('sandbox'), await make('helper')];
    const young = await make('pool');
    const longAgo = new Date(Date.now() - 6 * 60_000).toISOString();
    for (const instance of h.backend.instances.values()) if (instance.state.id !== young.id) instance.state.created_at = longAgo;
    const removed = await h.services.recovery.sweep((uuid) => h.services.pool.holds(uuid));
    expect(removed).toBe(2);
    const left = new Set(h.backend.instances.keys());
    expect([strays[0]!.id, strays[1]!.id].some((id) => left.has(id))).toBe(false);
    expect(left.has(strays[2]!.id) && left.has(young.id)).toBe(true);
    expect(pooled(h)).toHaveLength(2);
    expect((await h.services.sandboxes.get('kept')).status).toBe('running');
  });
});

describe('pool configuration', () => {
  it('reads the memory budget from its flag, environment variable and TOML key', () => {
    const dataDir = '/tmp/x';
    const dir = mkdtempSync(join(tmpdir(), 'sandboxd-pool-budget-'));
    try {
      const configFile = join(dir, 'pool.toml');
      writeFileSync(configFile, '[pool]\nmemory_mb = 1024\n');
      expect(loadConfig({ env: {}, flags: { dataDir } }).poolMemoryMb).toBe(8192);
      expect(loadConfig({ configFile, env: {}, flags: { dataDir } }).poolMemoryMb).toBe(1024);
      expect(loadConfig({ configFile, env: { SERVICE_POOL_MEMORY_MB: '2048' }, flags: { dataDir } }).poolMemoryMb).toBe(2048);
      expect(loadConfig({ configFile, env: { SERVICE_POOL_MEMORY_MB: '2048' }, flags: { dataDir, poolMemoryMb: '4096' } }).poolMemoryMb).toBe(4096);
      expect(() => loadConfig({ env: { SERVICE_POOL_MEMORY_MB: 'lots' }, flags: { dataDir } })).toThrow(/memory_mb|SERVICE_POOL_MEMORY_MB/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('reads the size and per-key sizes from flags, environment and TOML', () => {
    const dataDir = '/tmp/x';
    expect(loadConfig({ env: {}, flags: { dataDir } })).toMatchObject({ poolSize: 2, poolSizes: [] });
    expect(loadConfig({ env: { SERVICE_POOL_SIZE: '0' }, flags: { dataDir } }).poolSize).toBe(0);
    expect(loadConfig({ env: {}, flags: { dataDir, poolSizes: 'sandboxd/python:bookworm=4, img@sha256:ab=1,b@restrictive=0' } }).poolSizes).toEqual([
      { image: 'sandboxd/python:bookworm', profile: 'moderate', size: 4 },
      { image: 'img@sha256:ab', profile: 'moderate', size: 1 },
      { image: 'b', profile: 'restrictive', size: 0 },
    ]);
    const dir = mkdtempSync(join(tmpdir(), 'sandboxd-pool-'));
    const configFile = join(dir, 'pool.toml');
    writeFileSync(configFile, '[pool]\nsize = 3\nsizes = { "sandboxd/python:bookworm" = 4, "x@restrictive" = 1 }\n');
    expect(loadConfig({ configFile, env: {}, flags: { dataDir } })).toMatchObject({
      poolSize: 3,
      poolSizes: [
        { image: 'sandboxd/python:bookworm', profile: 'moderate', size: 4 },
        { image: 'x', profile: 'restrictive', size: 1 },
      ],
    });
    writeFileSync(configFile, '[pool]\nsizes = { "x" = -1 }\n');
    expect(() => loadConfig({ configFile, env: {}, flags: { dataDir } })).toThrow(/\[pool\]\.sizes in .*the size of 'x' must be an integer/);
    rmSync(dir, { recursive: true, force: true });
  });

  it('names what is wrong', () => {
    const dataDir = '/tmp/x';
    expect(() => loadConfig({ env: {}, flags: { dataDir, poolSize: '-1' } })).toThrow(/--pool-size/);
    expect(() => loadConfig({ env: {}, flags: { dataDir, poolSize: '65' } })).toThrow(/--pool-size/);
    expect(() => loadConfig({ env: {}, flags: { dataDir, poolSizes: 'img@fast=1' } })).toThrow(/--pool-sizes: 'fast' in 'img@fast' is not a profile/);
    expect(() => loadConfig({ env: { SERVICE_POOL_SIZES: 'img' }, flags: { dataDir } })).toThrow(/SERVICE_POOL_SIZES: 'img' is not image\[@profile\]=n/);
    expect(() => loadConfig({ env: {}, flags: { dataDir, poolSizes: 'img=many' } })).toThrow(/the size of 'img' must be an integer/);
  });
});

describe('WarmPool keys', () => {
  it('makes no key for an image that is not available: nothing retries', async () => {
    h = await warmed();
    const missing = { image: 'nonexistent/image:nope', profile: 'moderate' as const };
    const taken = h.services.pool.take(missing);
    await expect(taken.instance).rejects.toMatchObject({ code: 'IMAGE_UNAVAILABLE' });
    expect(h.services.pool.takeReady(missing)).toBeUndefined();
    await h.services.pool.settled();
    expect(h.services.pool.onDemandKeys).toBe(0);
    // Only the takers' own creates reached the backend; no fill was ever attempted for the key.
    const creates = h.backend.calls.filter((call) => call.op === 'create').length;
    h.services.pool.takeReady(missing);
    await h.services.pool.settled();
    expect(h.backend.calls.filter((call) => call.op === 'create').length).toBe(creates);
    expect(h.services.pool.onDemandKeys).toBe(0);
  });

  it('keeps at most MAX_ON_DEMAND_KEYS keys made on demand, evicting the least recently taken', async () => {
    h = await warmed({ poolSize: 1 });
    const images = Array.from({ length: MAX_ON_DEMAND_KEYS + 4 }, (_, i) => `team/app${i}:1`);
    for (const image of images) {
      h.backend.images.add(image);
      h.services.pool.takeReady({ image, profile: 'moderate' });
      await h.services.pool.settled();
    }
    expect(h.services.pool.onDemandKeys).toBe(MAX_ON_DEMAND_KEYS);
    // The first keys went, with their instances; the default image's pinned key stays.
    expect(pooled(h, images[0])).toHaveLength(0);
    expect(pooled(h, images.at(-1))).toHaveLength(1);
    expect(pooled(h)).toHaveLength(1);
  });
});
