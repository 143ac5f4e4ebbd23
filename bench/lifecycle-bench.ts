import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import Docker from 'dockerode';
import { del, post, type Api, BENCH_IMAGE } from './core-bench.js';
import { report, timePaired } from './stats.js';

const run = promisify(execFile);
const docker = async (...args: string[]) => (await run('docker', args)).stdout.trim();
/** 100 MB of incompressible files in /workspace, as the sandbox's default user. */
const FILL = 'for i in 0 1 2 3 4 5 6 7 8 9; do head -c 10000000 /dev/urandom > /workspace/data-$i; done';

/** `docker run` options of a plain container shaped like a sandbox of the profile. */
const PLAIN_RUN = {
  moderate: ['--init'],
  // The same tmpfs /workspace as a restrictive sandbox, under gVisor.
  restrictive: ['--init', '--runtime', 'runsc', '--read-only', '--network', 'none', '--tmpfs', '/workspace:rw,exec,size=512m,uid=1000,gid=1000'],
};

/**
 * Snapshot latency of a running sandbox holding 100 MB of files in /workspace, against a plain
 * Engine API commit (paused, as `docker commit` does, without the CLI's process start) of a
 * container holding the same; then restore latency (to a running
 * sandbox) against a plain `docker run -d` of the committed image. Interleaved, see
 * timePaired. For `restrictive` the plain commit misses the tmpfs: the difference is what
 * keeping it costs.
 */
export async function benchSnapshots(api: Api, n: number, profile: keyof typeof PLAIN_RUN): Promise<void> {
  const source = `bench-snap-${profile}-${process.pid}`;
  await post(api, '/sandboxes', { name: source, profile });
  await post(api, `/sandboxes/${source}/exec`, { command: ['sh', '-c', FILL] });
  const plain = await docker('run', '-d', ...PLAIN_RUN[profile], BENCH_IMAGE, 'sleep', 'infinity');
  const engine = new Docker();
  await docker('exec', plain, 'sh', '-c', FILL);
  const snapshots: string[] = [];
  const plainImages: string[] = [];
  const restored: string[] = [];
  const plainRuns: string[] = [];
  try {
    const snap = await timePaired(
      n,
      async (i) => {
        const name = `${source}-${i < 0 ? `w${-i}` : i}`;
        await post(api, '/snapshots', { sandbox: source, name });
        snapshots.push(name);
      },
      async (i) => {
        const tag = `${profile}-${process.pid}-${i < 0 ? `w${-i}` : i}`;
        await engine.getContainer(plain).commit({ repo: 'sandboxd-bench-plain', tag, pause: true });
        plainImages.push(`sandboxd-bench-plain:${tag}`);
      },
      1,
    );
    report(`snapshot, 100 MB, ${profile} (API)`, snap.ours, snap.plain, 'Engine API commit, paused');

    const restore = await timePaired(
      n,
      async (i) => {
        const name = `bench-rest-${profile}-${process.pid}-${i < 0 ? `w${-i}` : i}`;
        await post(api, `/snapshots/${snapshots[0]}/restore`, { as_name: name });
        restored.push(name);
      },
      async () => {
        plainRuns.push(await docker('run', '-d', ...PLAIN_RUN[profile], plainImages[0]!, 'sleep', 'infinity'));
      },
      1,
    );
    report(`restore to running, ${profile} (API)`, restore.ours, restore.plain, 'docker run -d of the image');
  } finally {
    for (const name of restored) await del(api, `/sandboxes/${name}`);
    for (const name of snapshots) await del(api, `/snapshots/${name}`);
    await del(api, `/sandboxes/${source}`);
    await docker('rm', '-f', plain, ...plainRuns);
    if (plainImages.length > 0) await docker('rmi', ...plainImages);
  }
}
