import type { Backend, VolumeInfo, VolumesCapability } from '../../backends/backend.js';
import { normalVolumePath, volumePathProblem, type VolumeMount } from '../../domain/volumes.js';
import { badRequest, conflict, notFound } from '../../errors.js';
import type { Volume } from '../../schemas/volume-schemas.js';
import type { SandboxRepository } from '../../state/sandbox-repository.js';
import { requireCapability } from '../support/capabilities.js';
import type { Departures } from '../support/departures.js';
import { KeyedMutex } from '../support/keyed-mutex.js';
import type { ServiceContext } from '../context.js';

/**
 * Named volumes: made and removed here, mounted by sandboxes at create (`checkMounts`). Which
 * sandboxes use one comes from their records (running, stopped or archived alike), so a volume
 * that an archived sandbox will mount again cannot be deleted from under it.
 */
export class VolumeService {
  private readonly backend: Backend;
  private readonly sandboxes: SandboxRepository;
  private readonly departures: Departures;
  private readonly locks = new KeyedMutex();

  constructor(ctx: Pick<ServiceContext, 'backend' | 'repos' | 'departures'>) {
    this.backend = ctx.backend;
    this.sandboxes = ctx.repos.sandboxes;
    this.departures = ctx.departures;
  }

  async create(name: string): Promise<Volume> {
    return this.locks.run(name, async () => {
      const volumes = this.capability();
      if (await volumes.inspectVolume(name)) throw conflict(`volume '${name}' already exists`);
      return { ...(await volumes.createVolume(name)), in_use_by: [] };
    });
  }

  async list(): Promise<Volume[]> {
    const [volumes, users] = await Promise.all([this.capability().listVolumes(), this.users()]);
    return volumes.sort((a, b) => a.name.localeCompare(b.name)).map((volume) => withUsers(volume, users));
  }

  async get(name: string): Promise<Volume> {
    const volume = await this.capability().inspectVolume(name);
    if (!volume) throw notFound(`volume '${name}' not found`);
    return withUsers(volume, await this.users());
  }

  /**
   * CONFLICT while a sandbox mounts it, naming the sandboxes. A removed sandbox's container
   * that the engine still removes holds the volume too: the delete waits for it.
   */
  async delete(name: string): Promise<string> {
    return this.locks.run(name, async () => {
      await this.departures.settled((sandbox) => sandbox.volumes?.some((mount) => mount.name === name) === true);
      const volume = await this.get(name);
      if (volume.in_use_by.length > 0) {
        throw conflict(`volume '${name}' is mounted by sandbox${volume.in_use_by.length > 1 ? 'es' : ''} ${volume.in_use_by.map((s) => `'${s}'`).join(', ')}: delete ${volume.in_use_by.length > 1 ? 'them' : 'it'} first`);
      }
      await this.capability().removeVolume(name);
      return `deleted volume ${name}`;
    });
  }

  private capability(): VolumesCapability {
    return requireCapability(this.backend, 'volumes');
  }

  /** Volume name -> the sandboxes that mount it. */
  private async users(): Promise<Map<string, string[]>> {
    const users = new Map<string, string[]>();
    for (const sandbox of await this.sandboxes.all()) {
      for (const mount of sandbox.volumes ?? []) users.set(mount.name, [...(users.get(mount.name) ?? []), sandbox.name]);
    }
    return users;
  }
}

function withUsers(volume: VolumeInfo, users: Map<string, string[]>): Volume {
  return { name: volume.name, created_at: volume.created_at, in_use_by: users.get(volume.name) ?? [] };
}

/**
 * A sandbox create's `volumes`, checked: each path absolute and not a system directory, no
 * volume nor path twice, every volume existing (404 naming it: volumes are made with POST
 * /volumes, never on the fly). null when there are none.
 */
export async function checkMounts(backend: Backend, mounts: readonly VolumeMount[] | undefined): Promise<VolumeMount[] | null> {
  if (!mounts || mounts.length === 0) return null;
  const volumes = requireCapability(backend, 'volumes');
  const checked: VolumeMount[] = [];
  for (const [index, mount] of mounts.entries()) {
    const field = `volumes[${index}]`;
    const problem = volumePathProblem(mount.path);
    if (problem) throw badRequest(`${field}.path: ${problem}`);
    const path = normalVolumePath(mount.path);
    const twice = checked.find((other) => other.name === mount.name);
    if (twice) throw badRequest(`${field}.name: volume '${mount.name}' is already mounted at ${twice.path}: a volume is mounted once per sandbox`);
    const nested = checked.find((other) => other.path === path || path.startsWith(`${other.path}/`) || other.path.startsWith(`${path}/`));
    if (nested) throw badRequest(`${field}.path: '${path}' overlaps volume '${nested.name}' at ${nested.path}`);
    checked.push({ name: mount.name, path, ...(mount.read_only ? { read_only: true } : {}) });
  }
  for (const [index, mount] of checked.entries()) {
    if (!(await volumes.inspectVolume(mount.name))) throw notFound(`volumes[${index}].name: volume '${mount.name}' not found`, { hint: { action: 'create_volume', volume: mount.name } });
  }
  return checked;
}
