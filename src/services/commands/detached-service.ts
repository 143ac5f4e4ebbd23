import { v7 as uuidv7 } from 'uuid';
import type { Backend, DetachedCapability, DetachedProcess } from '../../backends/backend.js';
import { notFound } from '../../errors.js';
import { requireCapability } from '../support/capabilities.js';
import { detachedCommand, type DetachedCommandBody, type DetachedLogsBody } from '../../schemas/detached-schemas.js';
import type { ExecInput } from '../../schemas/exec-schemas.js';
import { view } from '../../schemas/view.js';
import type { DetachedRecord, DetachedRepository } from '../../state/detached-repository.js';
import type { AuditService } from '../events/audit-service.js';
import { backendRequest, type ExecService } from './exec-service.js';
import type { SandboxRecord } from '../../state/sandbox-repository.js';
import type { SandboxService } from '../sandboxes/sandbox-service.js';
import type { ServiceContext } from '../context.js';

/**
 * Commands that run on after the request that started them. The sandbox keeps the process and
 * its last output (the Docker agent does); the store maps the service's ids, scoped to their
 * sandbox, to the sandbox's own process ids, so that status, logs and kill work after a server
 * restart. A command the sandbox no longer knows (it was restarted) reads as failed, exit null.
 */
export class DetachedService {
  private readonly repo: DetachedRepository;
  private readonly sandboxes: SandboxService;
  private readonly exec: ExecService;
  private readonly backend: Backend;
  private readonly audit: AuditService;

  constructor(ctx: Pick<ServiceContext, 'repos' | 'sandboxes' | 'exec' | 'backend' | 'audit'>) {
    this.repo = ctx.repos.detached;
    this.sandboxes = ctx.sandboxes;
    this.exec = ctx.exec;
    this.backend = ctx.backend;
    this.audit = ctx.audit;
  }

  /** Starts a command in a running sandbox and returns at once. */
  async start(name: string, input: ExecInput): Promise<DetachedCommandBody> {
    const sandbox = await this.sandboxes.requireRunning(name);
    this.exec.check(input);
    // Stdin and a timeout have no meaning for a command that outlives its request.
    const { stdin: _stdin, timeout_ms: _timeout, ...request } = backendRequest(input, sandbox.env);
    const process = await this.detached().startDetached(sandbox.backend_id, request);
    const record: DetachedRecord = {
      id: uuidv7(),
      sandbox_uuid: sandbox.uuid,
      process_id: process.id,
      pid: process.pid,
      command: input.command,
      started_at: process.started_at,
    };
    await this.repo.insert(record);
    await this.sandboxes.touch(sandbox);
    await this.audit.record('command_detached', sandbox, { id: record.id, command: input.command, ...(input.sudo ? { sudo: true } : {}) });
    return viewOf(sandbox, record, process);
  }

  /** A sandbox's detached commands, oldest first. */
  async list(name: string): Promise<DetachedCommandBody[]> {
    const sandbox = await this.sandboxes.requireRunning(name);
    const [records, processes] = await Promise.all([this.repo.forSandbox(sandbox.uuid), this.detached().listDetached(sandbox.backend_id)]);
    return records.map((record) => viewOf(sandbox, record, matching(processes, record)));
  }

  async get(name: string, id: string): Promise<DetachedCommandBody> {
    const { sandbox, record } = await this.require(name, id);
    return viewOf(sandbox, record, matching(await this.detached().listDetached(sandbox.backend_id), record));
  }

  /** The last output of one stream; empty for a command the sandbox lost. */
  async logs(name: string, id: string, stream: 'stdout' | 'stderr'): Promise<DetachedLogsBody> {
    const { sandbox, record } = await this.require(name, id);
    const detached = this.detached();
    const process = matching(await detached.listDetached(sandbox.backend_id), record);
    const content = process ? await detached.detachedLogs(sandbox.backend_id, process.id, stream) : Buffer.alloc(0);
    return { id, stream, content: content.toString('utf8') };
  }

  /** Kills the command's process tree (a finished one stays as it was); returns its status after. */
  async kill(name: string, id: string): Promise<DetachedCommandBody> {
    const { sandbox, record } = await this.require(name, id);
    const detached = this.detached();
    const process = matching(await detached.listDetached(sandbox.backend_id), record);
    if (process?.status === 'running') {
      await detached.killDetached(sandbox.backend_id, process.id);
      await this.audit.record('detached_killed', sandbox, { id });
    }
    return viewOf(sandbox, record, matching(await detached.listDetached(sandbox.backend_id), record));
  }

  /** The backend's detached commands; UNSUPPORTED where it has none. */
  private detached(): DetachedCapability {
    return requireCapability(this.backend, 'detached');
  }

  private async require(name: string, id: string): Promise<{ sandbox: SandboxRecord & { backend_id: string }; record: DetachedRecord }> {
    const sandbox = await this.sandboxes.requireRunning(name);
    const record = await this.repo.byId(sandbox.uuid, id);
    if (!record) throw notFound(`detached command '${id}' not found in sandbox '${name}'`);
    return { sandbox, record };
  }
}

/** The sandbox's process for a record: same id and start time (ids restart with the sandbox). */
function matching(processes: DetachedProcess[], record: DetachedRecord): DetachedProcess | undefined {
  return processes.find((p) => p.id === record.process_id && p.started_at === record.started_at);
}

/**
 * The API view of a detached command: its record, with the sandbox's name, and the status and
 * exit code its sandbox reports (a process the sandbox no longer knows reads as failed, exit null).
 */
function viewOf(sandbox: SandboxRecord, record: DetachedRecord, process: DetachedProcess | undefined): DetachedCommandBody {
  return view(detachedCommand, { ...record, sandbox: sandbox.name, status: process?.status ?? 'failed', exit_code: process ? process.exit_code : null });
}
