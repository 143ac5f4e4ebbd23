import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, dockerRuntime, uniqueName, type DockerRuntime } from '../helpers/docker-runtime.js';

let rt: DockerRuntime;
const api = (method: string, path: string, body?: unknown) => call(rt.url, method, path, body);

beforeAll(async () => {
  rt = await dockerRuntime({ poolSize: 0 });
});

afterAll(async () => {
  await rt.dispose();
});

/** Polls an instance until its status is final (at most `seconds`). */
async function finished(id: string, seconds = 120): Promise<any> {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const instance = (await api('GET', `/orchestrations/${id}`)).body.data;
    if (['completed', 'failed', 'terminated'].includes(instance.status)) return instance;
    if (Date.now() > deadline) throw new Error(`orchestration ${id} never finished: ${JSON.stringify(instance.steps)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe('orchestrations on Docker', () => {
  it('runs three exec steps that append to a file in one sandbox, then a run step in a fresh container', async () => {
    const box = uniqueName('orch');
    const made = await api('POST', '/sandboxes', { name: box });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    const name = uniqueName('lines');
    const append = (id: string) => ({ id, type: 'activity', exec: { sandbox: '${input.sandbox}', command: ['sh', '-c', `echo ${id} >> /workspace/lines; wc -l < /workspace/lines`] } });
    const defined = await api('POST', '/orchestrations/definitions', {
      name,
      steps: [
        append('one'),
        append('two'),
        append('three'),
        { id: 'env', type: 'activity', output: 'json', run: { command: ['sh', '-c', 'printf \'{"step": "%s", "attempt": %s}\' "$SANDBOXD_STEP" "$SANDBOXD_ATTEMPT"'] } },
      ],
      output: { lines: '${steps.three.output}', env: '${steps.env.output}' },
    });
    expect(defined.status).toBe(201);
    const started = await api('POST', '/orchestrations', { name, input: { sandbox: box } });
    expect(started.status).toBe(202);
    const done = await finished(started.body.data.id);
    expect(done).toMatchObject({ status: 'completed', output: { lines: '3\n', env: { step: 'env', attempt: 1 } } });
    const file = (await api('GET', `/sandboxes/${box}/files/workspace/lines`)).body.data.content as string;
    expect(file).toBe('one\ntwo\nthree\n');
    await api('DELETE', `/sandboxes/${box}`);
  });

  it('terminate kills a running exec', async () => {
    const box = uniqueName('orchk');
    const made = await api('POST', '/sandboxes', { name: box });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    const name = uniqueName('sleepy');
    await api('POST', '/orchestrations/definitions', { name, steps: [{ id: 'nap', type: 'activity', exec: { sandbox: box, command: ['sleep', '300'] } }] });
    const { id } = (await api('POST', '/orchestrations', { name })).body.data;
    for (let round = 0; round < 300; round++) {
      const steps = (await api('GET', `/orchestrations/${id}`)).body.data.steps as { status: string }[];
      if (steps[0]?.status === 'running') break;
      await new Promise((r) => setTimeout(r, 100));
    }
    // How many processes of the sandbox run `sleep 300` (read from /proc: no ps needed).
    const sleepers = async () =>
      Number((await api('POST', `/sandboxes/${box}/exec`, { command: ['sh', '-c', 'for f in /proc/[0-9]*/cmdline; do tr "\\0" " " < $f; echo; done 2>/dev/null | grep -c "^sleep 30[0]" || true'] })).body.data.stdout.trim());
    expect(await sleepers()).toBe(1);
    const terminated = await api('POST', `/orchestrations/${id}/terminate`);
    expect(terminated.body.data.status).toBe('terminated');
    let left = 1;
    for (let round = 0; round < 50 && left > 0; round++) {
      left = await sleepers();
      if (left > 0) await new Promise((r) => setTimeout(r, 100));
    }
    expect(left).toBe(0);
    await api('DELETE', `/sandboxes/${box}`);
  });

  it("terminate kills a running `run` activity: its container is removed or reset without the command", async () => {
    const name = uniqueName('sleepyrun');
    const marker = String(300 + Math.floor(Math.random() * 600));
    await api('POST', '/orchestrations/definitions', { name, steps: [{ id: 'nap', type: 'activity', run: { command: ['sleep', marker] } }] });
    const { id } = (await api('POST', '/orchestrations', { name })).body.data;
    // The run's container: the one whose processes include `sleep <marker>`.
    const docker = new Docker();
    const runsMarker = async (container: string) => {
      const top = await docker
        .getContainer(container)
        .top()
        .catch(() => ({ Processes: [] as string[][] }));
      return (top.Processes ?? []).some((row: string[]) => row.join(' ').includes(`sleep ${marker}`));
    };
    let container: string | undefined;
    for (let round = 0; round < 300 && !container; round++) {
      for (const listed of await docker.listContainers()) if (await runsMarker(listed.Id)) container = listed.Id;
      if (!container) await new Promise((r) => setTimeout(r, 100));
    }
    expect(container, 'the run activity never started its container').toBeDefined();
    const terminated = await api('POST', `/orchestrations/${id}/terminate`);
    expect(terminated.body.data.status).toBe('terminated');
    // With reuse the container goes back to the run pool, reset (its processes killed, checked
    // pristine); without it the container is removed. Either way the command is gone.
    let running = true;
    for (let round = 0; round < 100 && running; round++) {
      running = await runsMarker(container!);
      if (running) await new Promise((r) => setTimeout(r, 100));
    }
    expect(running, `sleep ${marker} still runs in ${container} after terminate`).toBe(false);
  });
});
