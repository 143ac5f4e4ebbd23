import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import type Docker from 'dockerode';
import { describe, expect, it } from 'vitest';
import { setHostname } from '../../../../src/backends/docker/docker-hostname.js';

/** A process in a UTS namespace of its own, as a runc container's first process is, that prints its hostname when told to. */
async function namespaced() {
  const child = spawn('unshare', ['--uts', '--', 'sh', '-c', 'read go; hostname'], { stdio: ['pipe', 'pipe', 'inherit'] });
  await once(child, 'spawn');
  let printed = '';
  child.stdout.on('data', (chunk) => (printed += chunk));
  const info = { HostConfig: { Runtime: 'runc' }, State: { Pid: child.pid } } as unknown as Docker.ContainerInspectInfo;
  return {
    info,
    async hostname() {
      child.stdin.end('\n');
      // 'close', not 'exit': a child can exit before its stdout has been read to the end.
      await once(child, 'close');
      return printed.trim();
    },
  };
}
const hostnamers = () => execFileSync('pgrep', ['-f', 'sandboxd-agent hostnamer'], { encoding: 'utf8' }).split('\n').filter(Boolean);

describe("the host's naming of a claimed runc container (one resident hostnamer)", () => {
  it('names the host of each namespace it is given, many at once, and leaves the host its own name', async () => {
    const before = execFileSync('hostname', { encoding: 'utf8' });
    const targets = await Promise.all(Array.from({ length: 6 }, namespaced));
    // unshare sets up the namespace before it starts sh: wait until it is sh.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await Promise.all(targets.map((target, i) => setHostname(target.info, `claimed-${i}`)))).toEqual(targets.map(() => true));
    expect(await Promise.all(targets.map((target) => target.hostname()))).toEqual(targets.map((_, i) => `claimed-${i}`));
    expect(execFileSync('hostname', { encoding: 'utf8' })).toBe(before);
    expect(hostnamers()).toHaveLength(1);
  });

  it('answers false for a process that is gone, and starts again after the hostnamer is killed', async () => {
    const gone = { HostConfig: { Runtime: 'runc' }, State: { Pid: 999_999_999 } } as unknown as Docker.ContainerInspectInfo;
    expect(await setHostname(gone, 'nobody')).toBe(false);
    for (const pid of hostnamers()) process.kill(Number(pid), 'SIGKILL');
    await new Promise((resolve) => setTimeout(resolve, 100));
    const target = await namespaced();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await setHostname(target.info, 'after-a-kill')).toBe(true);
    expect(await target.hostname()).toBe('after-a-kill');
  });

  it('leaves a gVisor sandbox to its agent', async () => {
    const gvisor = { HostConfig: { Runtime: 'runsc' }, State: { Pid: process.pid } } as unknown as Docker.ContainerInspectInfo;
    expect(await setHostname(gvisor, 'x')).toBe(false);
  });
});
