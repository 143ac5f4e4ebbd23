import { afterEach, describe, expect, it } from 'vitest';
import { fakeHarness, type FakeHarness } from '../../../../helpers/fake-app.js';

/**
 * Issue 25, item 17: a class's vcpus and memory_mb were checked only when its first call made
 * a sandbox (a class the host could never run was registered, and every call then failed).
 * They are checked against what the host can give one sandbox when the class is defined.
 */
let h: FakeHarness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const define = (body: object) =>
  h!.app.inject({ method: 'POST', url: '/objects/classes', payload: { name: 'big', runtime: 'node', source: 'export const x = 1;', validate: false, ...body } });

describe('object class limits', () => {
  it('refuses at definition a class whose sandboxes the host cannot give, naming the limit', async () => {
    h = await fakeHarness({ poolSize: 0, hostLimits: { cpus: 2, memoryMb: 4096 } });
    const cpus = await define({ vcpus: 64 });
    expect([cpus.statusCode, cpus.json()]).toEqual([400, { success: false, error: 'vcpus: at most 2 on this host', code: 'BAD_REQUEST' }]);
    const memory = await define({ memory_mb: 1_000_000 });
    expect([memory.statusCode, memory.json().error]).toEqual([400, 'memory_mb: at most 4096 on this host']);
    expect((await h.app.inject({ method: 'GET', url: '/objects/classes/big' })).statusCode).toBe(404);
    expect((await define({ vcpus: 2, memory_mb: 4096 })).statusCode).toBe(201);
  });
});
