import type Docker from 'dockerode';
import { mkdir, readdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ImageBuildLimits } from '../backend.js';

/**
 * The bounds of an image build on the engine. The classic builder's API takes memory and CPU
 * shares for its step containers, but no pids limit and no storage size; so:
 *
 * - processes: the steps run under a cgroup parent made here with `pids.max` (the kernel holds a
 *   fork bomb at it: a fork past it fails), where the engine uses cgroupfs and this process sees
 *   the engine's cgroup tree (the server beside the engine); elsewhere the running step's
 *   process count is read from the engine's stats. Reaching the limit stops the build.
 * - disk: measured, not bounded by the storage: the running step's writable layer
 *   (`SizeRw`) while it runs, and each layer a step made (its image's size less its parent's)
 *   after it; past the per-step or the per-build bound the build stops.
 */

/** The cgroup file systems this process reads the engine's from. */
const CGROUP_ROOT = '/sys/fs/cgroup';
/** How often the running step is measured. */
export const WATCH_INTERVAL_MS = 500;

const MIB = 1024 * 1024;

/** A cgroup parent of one build's step containers, with its `pids.max`. */
export class BuildCgroup {
  private constructor(
    /** The parent as the engine takes it (`cgroupparent`). */
    readonly parent: string,
    private readonly pidsDir: string,
  ) {}

  /** The build's cgroup, or undefined where the engine's cgroups cannot be set from here. */
  static async open(docker: Docker, buildId: string, pidsMax: number): Promise<BuildCgroup | undefined> {
    const info = (await docker.info().catch(() => ({}))) as { CgroupDriver?: string; CgroupVersion?: string };
    if (info.CgroupDriver !== 'cgroupfs') return undefined;
    const name = cgroupName(buildId);
    const pidsDir = info.CgroupVersion === '2' ? join(CGROUP_ROOT, name) : join(CGROUP_ROOT, 'pids', name);
    try {
      await mkdir(pidsDir, { recursive: true });
      await writeFile(join(pidsDir, 'pids.max'), String(pidsMax));
    } catch {
      await rmdir(pidsDir).catch(() => undefined);
      return undefined;
    }
    return new BuildCgroup(`/${name}`, pidsDir);
  }

  /**
   * Whether a fork failed at the limit, or the count reached it. The kernel counts a refused
   * fork in `pids.events` of the cgroup of the process that forked (under cgroup v1, the step
   * container's, below this one), so each child's is read too; `pids.peak`, where the kernel
   * has it, keeps a peak that a poll between two bursts would miss.
   */
  async limitReached(pidsMax: number): Promise<boolean> {
    const children = await readdir(this.pidsDir, { withFileTypes: true }).catch(() => []);
    const dirs = [this.pidsDir, ...children.filter((entry) => entry.isDirectory()).map((entry) => join(this.pidsDir, entry.name))];
    for (const dir of dirs) {
      const events = await readFile(join(dir, 'pids.events'), 'utf8').catch(() => '');
      if (Number(/^max (\d+)/m.exec(events)?.[1] ?? 0) > 0) return true;
    }
    const count = async (file: string) => Number((await readFile(join(this.pidsDir, file), 'utf8').catch(() => '0')).trim());
    return (await count('pids.current')) >= pidsMax || (await count('pids.peak')) >= pidsMax;
  }
}

/** A build's cgroup directory name (in every controller the engine made it in). */
const cgroupName = (buildId: string) => `sandboxd-build-${buildId}`;

/** Removes a build's cgroup directories (the engine leaves the parent of its containers' behind). */
export async function removeBuildCgroups(buildId: string): Promise<void> {
  const name = cgroupName(buildId);
  const controllers = await readdir(CGROUP_ROOT).catch(() => [] as string[]);
  await Promise.all([join(CGROUP_ROOT, name), ...controllers.map((c) => join(CGROUP_ROOT, c, name))].map((dir) => rmdir(dir).catch(() => undefined)));
}

/**
 * Watches one build: fed the engine's log lines (the step running, its container, the image
 * each step left), it measures what the steps write and hold and calls `exceeded` once with
 * the sentence that says which bound was passed.
 */
export class BuildWatch {
  private step = '';
  private container: string | undefined;
  /** The size of the image the current stage's last step left. */
  private previousSize = 0;
  private writtenBytes = 0;
  private timer: NodeJS.Timeout | undefined;
  private measuring: Promise<void> = Promise.resolve();
  private done = false;

  constructor(
    private readonly docker: Docker,
    private readonly limits: ImageBuildLimits,
    private readonly cgroup: BuildCgroup | undefined,
    private readonly exceeded: (message: string) => void,
  ) {}

  start(): void {
    const tick = async () => {
      await this.check().catch(() => undefined);
      if (!this.done) this.timer = setTimeout(() => void tick(), WATCH_INTERVAL_MS);
    };
    this.timer = setTimeout(() => void tick(), WATCH_INTERVAL_MS);
  }

  /** Stops watching once the last step's layer is measured (which may still find it past a bound). */
  async stop(): Promise<void> {
    clearTimeout(this.timer);
    await this.measuring;
    this.done = true;
    clearTimeout(this.timer);
  }

  /** A step begins (`Step 3/5 : RUN ...`). */
  stepStarted(text: string): void {
    this.step = text;
    this.container = undefined;
  }

  /** The step's container (`Running in <id>`). */
  containerStarted(id: string): void {
    this.container = id;
  }

  /** A step left an image: `own` when the build made it (not FROM's, not a cached one). */
  imageLeft(id: string, own: boolean): void {
    this.container = undefined;
    const step = this.step;
    this.measuring = this.measuring.then(async () => {
      const size = await this.docker
        .getImage(id)
        .inspect()
        .then((info) => info.Size)
        .catch(() => undefined);
      if (size === undefined) return;
      const layer = own ? Math.max(0, size - this.previousSize) : 0;
      this.previousSize = size;
      this.charge(step, layer, true);
    });
  }

  private async check(): Promise<void> {
    const container = this.container;
    if (this.cgroup ? await this.cgroup.limitReached(this.limits.pids) : container && (await this.pidsOf(container)) >= this.limits.pids) {
      this.fail(`${this.stepName(this.step)} reached the build's limit of ${this.limits.pids} processes (--build-pids-limit, [images].build_pids_limit): the build is stopped`);
      return;
    }
    if (!container) return;
    const info = (await this.docker
      .getContainer(container)
      .inspect({ size: true } as Docker.ContainerInspectOptions)
      .catch(() => undefined)) as { SizeRw?: number } | undefined;
    if (info?.SizeRw !== undefined && this.container === container) this.charge(this.step, info.SizeRw, false);
  }

  private async pidsOf(container: string): Promise<number> {
    const stats = (await this.docker
      .getContainer(container)
      .stats({ stream: false, 'one-shot': true } as { stream: false })
      .catch(() => undefined)) as { pids_stats?: { current?: number } } | undefined;
    return stats?.pids_stats?.current ?? 0;
  }

  /** Checks a step's writes against the bounds; `final` adds them to the build's. */
  private charge(step: string, bytes: number, final: boolean): void {
    const { stepDiskBytes, diskBytes } = this.limits;
    const total = this.writtenBytes + bytes;
    if (final) this.writtenBytes = total;
    if (bytes > stepDiskBytes) {
      this.fail(`${this.stepName(step)} wrote ${mib(bytes)} MiB, past the limit of ${mib(stepDiskBytes)} MiB per step (--build-step-disk-mb, [images].build_step_disk_mb): the build is stopped`);
    } else if (total > diskBytes) {
      this.fail(`the build's steps wrote ${mib(total)} MiB, past the limit of ${mib(diskBytes)} MiB per build (--build-disk-mb, [images].build_disk_mb): the build is stopped`);
    }
  }

  private stepName(step: string): string {
    const match = /^Step (\d+\/\d+) : (.*)$/.exec(step);
    if (!match) return 'a step';
    const text = match[2] ?? '';
    return `step ${match[1]} (${text.length > 60 ? `${text.slice(0, 57)}...` : text})`;
  }

  private fail(message: string): void {
    if (this.done) return;
    this.done = true;
    clearTimeout(this.timer);
    this.exceeded(message);
  }
}

const mib = (bytes: number) => Math.ceil(bytes / MIB);
