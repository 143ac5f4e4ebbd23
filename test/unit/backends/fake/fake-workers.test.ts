import { describe, expect, it } from 'vitest';
import { FakeBackend } from '../../../../src/backends/fake/fake-backend.js';
import { ServiceError, WorkerFailed } from '../../../../src/errors.js';
import { DEFAULT_IMAGE } from '../../../../src/images/catalog.js';

/** A fake with workers and one running instance. */
async function fakeWithInstance() {
  const fake = new FakeBackend({ capabilities: ['workers'] });
  const { id } = await fake.create({ name: 'w', uuid: 'u', image: DEFAULT_IMAGE, vcpus: 1, memory_mb: 256, profile: 'moderate', env: {} });
  return { fake, id };
}

const failureOf = (work: Promise<unknown>) => work.then(() => undefined, (err: unknown) => err as ServiceError);

describe('FakeBackend workers', () => {
  it('echo by default; a scripted handler answers with the request, the call and stderr', async () => {
    const { fake, id } = await fakeWithInstance();
    await fake.ensureWorker(id, 'k', { command: ['node', 'runner.mjs'], env: { A: '1' } });
    expect(await fake.callWorker(id, 'k', { nonce: 'n1', line: 'hello', timeout_ms: 1000 })).toMatchObject({ line: 'n1 hello', stderr: '' });
    const seen: unknown[] = [];
    fake.scriptWorker(async (key, request, call) => {
      seen.push({ key, request, call });
      return { line: `${call.nonce} {"ok":true}`, stderr: 'log\n' };
    });
    expect(await fake.callWorker(id, 'k', { nonce: 'n2', line: '{"method":"get"}', timeout_ms: 1000 })).toMatchObject({ line: 'n2 {"ok":true}', stderr: 'log\n' });
    expect(seen).toEqual([{ key: 'k', request: { command: ['node', 'runner.mjs'], env: { A: '1' } }, call: { nonce: 'n2', line: '{"method":"get"}', timeout_ms: 1000 } }]);
  });

  it('counts starts: the same request reuses the worker, a failure or another request starts a new one', async () => {
    const { fake, id } = await fakeWithInstance();
    const request = { command: ['python3', 'runner.py'] };
    expect((await fake.ensureWorker(id, 'k', request)).started).toBe(true);
    expect((await fake.ensureWorker(id, 'k', request)).started).toBe(false);
    expect(fake.workerStarts).toHaveLength(1);
    fake.scriptWorker(() => 'garbage');
    expect(await failureOf(fake.callWorker(id, 'k', { nonce: 'n', line: 'x', timeout_ms: 1000 }))).toMatchObject({ details: { reason: 'garbage', line: 'garbage' } });
    expect((await fake.ensureWorker(id, 'k', request)).started).toBe(true);
    expect((await fake.ensureWorker(id, 'k', { ...request, workdir: '/workspace' })).started).toBe(true);
    expect(fake.workerStarts.map((start) => [start.id, start.key, start.request.workdir])).toEqual([
      [id, 'k', undefined],
      [id, 'k', undefined],
      [id, 'k', '/workspace'],
    ]);
  });

  it('a hang times out and stops the worker; an exit and a thrown error fail the call', async () => {
    const { fake, id } = await fakeWithInstance();
    await fake.ensureWorker(id, 'k', { command: ['w'] });
    fake.scriptWorker(() => ({ hang: true, stderr: 'never printed' }));
    expect(await failureOf(fake.callWorker(id, 'k', { nonce: 'n', line: 'x', timeout_ms: 20 }))).toMatchObject({ code: 'TIMEOUT' });
    expect(await fake.listWorkers(id)).toEqual([]);
    await fake.ensureWorker(id, 'k', { command: ['w'] });
    fake.scriptWorker(() => ({ exit_code: 2, stderr: 'Traceback\n' }));
    const exited = await failureOf(fake.callWorker(id, 'k', { nonce: 'n', line: 'x', timeout_ms: 1000 }));
    expect(exited).toBeInstanceOf(WorkerFailed);
    expect(exited).toMatchObject({ code: 'METHOD_FAILED', details: { reason: 'exited', exit_code: 2, stderr: 'Traceback\n' } });
    await fake.ensureWorker(id, 'k', { command: ['w'] });
    fake.scriptWorker(() => {
      throw new ServiceError('BACKEND_UNAVAILABLE', 'scripted');
    });
    expect(await failureOf(fake.callWorker(id, 'k', { nonce: 'n', line: 'x', timeout_ms: 1000 }))).toMatchObject({ code: 'BACKEND_UNAVAILABLE' });
  });

  it('runs the calls of one worker one at a time, in order', async () => {
    const { fake, id } = await fakeWithInstance();
    await fake.ensureWorker(id, 'k', { command: ['w'] });
    let running = 0;
    let most = 0;
    const order: string[] = [];
    fake.scriptWorker(async (_key, _request, call) => {
      most = Math.max(most, ++running);
      await new Promise((resolve) => setTimeout(resolve, 5));
      order.push(call.nonce);
      running--;
      return `${call.nonce} done`;
    });
    const replies = await Promise.all(['a', 'b', 'c', 'd'].map((nonce) => fake.callWorker(id, 'k', { nonce, line: 'x', timeout_ms: 1000 })));
    expect(replies.map((reply) => reply.line)).toEqual(['a done', 'b done', 'c done', 'd done']);
    expect(order).toEqual(['a', 'b', 'c', 'd']);
    expect(most).toBe(1);
  });

  it('a worker that died between calls is NOT_FOUND; a stop ends a call in progress as an exit', async () => {
    const { fake, id } = await fakeWithInstance();
    await fake.ensureWorker(id, 'k', { command: ['w'] });
    fake.endWorker(id, 'k');
    expect(await failureOf(fake.callWorker(id, 'k', { nonce: 'n', line: 'x', timeout_ms: 1000 }))).toMatchObject({ code: 'NOT_FOUND' });
    await fake.ensureWorker(id, 'k', { command: ['w'] });
    let reached: () => void = () => undefined;
    const inCall = new Promise<void>((resolve) => (reached = resolve));
    fake.scriptWorker(() => {
      reached();
      return new Promise<never>(() => undefined);
    });
    const pending = failureOf(fake.callWorker(id, 'k', { nonce: 'n', line: 'x', timeout_ms: 60_000 }));
    await inCall;
    await fake.stopWorker(id, 'k');
    expect(await pending).toMatchObject({ details: { reason: 'exited', exit_code: 137 } });
  });

  it('refuses more than 64 workers, and is UNSUPPORTED once omitted', async () => {
    const { fake, id } = await fakeWithInstance();
    for (let i = 0; i < 64; i++) await fake.ensureWorker(id, `w${i}`, { command: ['w'] });
    expect(await failureOf(fake.ensureWorker(id, 'one-more', { command: ['w'] }))).toMatchObject({ code: 'LIMIT_REACHED' });
    fake.omit('workers');
    expect(await failureOf(fake.listWorkers(id))).toMatchObject({ code: 'UNSUPPORTED' });
    expect(await failureOf(fake.ensureWorker(id, 'k', { command: ['w'] }))).toMatchObject({ code: 'UNSUPPORTED' });
  });
});
