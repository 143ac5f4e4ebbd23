import { setTimeout as sleep } from 'node:timers/promises';
import { v7 as uuidv7 } from 'uuid';
import type { Backend, DetachedCapability, DetachedLog, DetachedProcess } from '../../backends/backend.js';
import { badRequest, notFound } from '../../errors.js';
import { requireCapability } from '../support/capabilities.js';
import { detachedCommand, type DetachedCommandBody, type DetachedLogsBody } from '../../schemas/detached-schemas.js';
import type { ExecInput } from '../../schemas/exec-schemas.js';
import { view } from '../../schemas/view.js';
import type { DetachedRecord, DetachedRepository } from '../../state/detached-repository.js';
import type { Logger } from '../../telemetry/logger.js';
import type { AuditApi } from '../events/api.js';
import { isoNow, type Clock } from '../support/clock.js';
import { backendRequest, type ExecService } from './exec-service.js';
import type { SandboxRecord } from '../../state/sandbox-repository.js';
import type { SandboxesApi } from '../sandboxes/api.js';
import type { ServiceContext } from '../context.js';

/** How often a followed log asks the sandbox for new output. */
export const FOLLOW_POLL_MS = 250;

type Stream = 'stdout' | 'stderr';

/** One piece of a followed log: `data` starts at byte `offset` of the stream. */
export type FollowEvent = { type: 'output'; data: Buffer; offset: number } | { type: 'done'; command: DetachedCommandBody; next_offset: number };

/**
 * Commands that run on after the request that started them. The sandbox's agent keeps the
 * process and its last output while the sandbox runs; the store maps the service's ids, scoped
 * to their sandbox, to the sandbox's own process ids. When the service observes a command's
 * end (a read of it, or the stop of its sandbox) it records the status, exit code, end time and
 * output on the host, so that they outlive the sandbox's container. A command that was still
 * running when its sandbox stopped, or that the sandbox no longer knows, is `lost`.
 */
export class DetachedService {
  private readonly repo: DetachedRepository;
  private readonly sandboxes: SandboxesApi;
  private readonly exec: ExecService;
  private readonly backend: Backend;
  private readonly audit: AuditApi;
  private readonly clock: Clock;
  private readonly logger: Logger;

  constructor(ctx: Pick<ServiceContext, 'repos' | 'sandboxes' | 'backend' | 'audit' | 'clock' | 'logger'> & { exec: ExecService }) {
    this.repo = ctx.repos.detached;
    this.sandboxes = ctx.sandboxes;
    this.exec = ctx.exec;
    this.backend = ctx.backend;
    this.audit = ctx.audit;
    this.clock = ctx.clock;
    this.logger = ctx.logger;
    ctx.sandboxes.onBeforeStop((sandbox) => this.collect(sandbox));
    ctx.sandboxes.onRemoved((sandbox) => this.repo.deleteForSandbox(sandbox.uuid));
  }

  /** Starts a command in a running sandbox and returns at once; `gated`: the request passed the gate where it entered. */
  async start(name: string, input: ExecInput, { gated = false }: { gated?: boolean } = {}): Promise<DetachedCommandBody> {
    // Stdin and a timeout have no meaning for a command that outlives its request: refused, not ignored.
    const refused = (['stdin', 'timeout_ms'] as const).filter((field) => input[field] !== undefined);
    if (refused.length > 0) {
      throw badRequest(`${refused.join(', ')}: not taken by a detached command, which outlives its request (kill it with DELETE)`);
    }
    const sandbox = await this.sandboxes.requireRunning(name);
    if (!gated) this.exec.gate(input);
    const { stdin: _stdin, timeout_ms: _timeout, ...request } = backendRequest(input, await this.exec.envOf(sandbox));
    const process = await this.detached().startDetached(sandbox.backend_id, request);
    const record: DetachedRecord = {
      id: uuidv7(),
      sandbox_uuid: sandbox.uuid,
      process_id: process.id,
      pid: process.pid,
      command: input.command,
      started_at: process.started_at,
      status: null,
      exit_code: null,
      finished_at: null,
    };
    await this.repo.insert(record);
    await this.sandboxes.touch(sandbox);
    await this.audit.record('command_detached', sandbox, { id: record.id, command: input.command, ...(input.sudo ? { sudo: true } : {}) });
    return viewOf(sandbox, record, process);
  }

  /** A sandbox's detached commands, oldest first (also of a stopped sandbox: what was kept). */
  async list(name: string): Promise<DetachedCommandBody[]> {
    const sandbox = await this.sandboxes.require(name);
    const records = await this.repo.forSandbox(sandbox.uuid);
    const processes = await this.processes(sandbox, records);
    return Promise.all(records.map(async (record) => viewOf(sandbox, await this.observe(sandbox, record, processes))));
  }

  async get(name: string, id: string): Promise<DetachedCommandBody> {
    const { sandbox, record } = await this.require(name, id);
    return viewOf(sandbox, await this.observe(sandbox, record, await this.processes(sandbox, [record])));
  }

  /**
   * One stream's output from byte `offset` on: from the sandbox while the command runs, from the
   * host once it ended. Only the last 4 MiB of a stream are kept: an offset before them reads
   * from the first kept byte (the answer's `offset` says where).
   */
  async logs(name: string, id: string, stream: Stream, offset = 0): Promise<DetachedLogsBody> {
    const { sandbox, record } = await this.require(name, id);
    const { command, log } = await this.read(sandbox, record, stream);
    const from = Math.max(offset, log.start);
    const bytes = log.content.subarray(Math.min(from - log.start, log.content.length));
    const content = bytes.toString('utf8');
    // The other stream by name too, whole: clients that read `stdout` and `stderr` (the agentkernel SDKs).
    const other = stream === 'stdout' ? 'stderr' : 'stdout';
    const rest = (await this.read(sandbox, record, other)).log.content.toString('utf8');
    const both = stream === 'stdout' ? { stdout: content, stderr: rest } : { stdout: rest, stderr: content };
    return { id, stream, content, offset: from, next_offset: from + bytes.length, status: command.status, ...both };
  }

  /**
   * Follows one stream from byte `offset` until the command ends: yields each new piece of
   * output as the sandbox reports it (asked every FOLLOW_POLL_MS), then `done` with the
   * command's final view. Ends early when `signal` aborts.
   */
  async *follow(name: string, id: string, stream: Stream, offset: number, signal: AbortSignal): AsyncGenerator<FollowEvent> {
    let next = offset;
    for (;;) {
      const { sandbox, record } = await this.require(name, id);
      const { command, log } = await this.read(sandbox, record, stream);
      const from = Math.max(next, log.start);
      const data = log.content.subarray(Math.min(from - log.start, log.content.length));
      if (data.length > 0) yield { type: 'output', data, offset: from };
      next = from + data.length;
      if (command.status !== 'running') {
        yield { type: 'done', command, next_offset: next };
        return;
      }
      try {
        await sleep(FOLLOW_POLL_MS, undefined, { signal });
      } catch {
        return;
      }
    }
  }

  /** Kills the command's process tree (a finished one stays as it was); returns its status after. */
  async kill(name: string, id: string): Promise<DetachedCommandBody> {
    const { sandbox, record } = await this.require(name, id);
    const running = this.sandboxes.assertRunning(sandbox);
    const detached = this.detached();
    const process = record.status === null ? matching(await detached.listDetached(running.backend_id), record) : undefined;
    if (process?.status === 'running') {
      await detached.killDetached(running.backend_id, process.id);
      await this.audit.record('detached_killed', sandbox, { id });
    }
    return viewOf(sandbox, await this.observe(sandbox, record, await this.processes(sandbox, [record])));
  }

  /**
   * Records on the host what the sandbox's agent knows of its open commands, before the sandbox
   * stops: ended ones as they ended, running ones as lost; each with its output.
   */
  private async collect(sandbox: SandboxRecord & { backend_id: string }): Promise<void> {
    if (!this.backend.capabilities.detached) return;
    const open = (await this.repo.forSandbox(sandbox.uuid)).filter((record) => record.status === null);
    if (open.length === 0) return;
    const processes = await this.detached().listDetached(sandbox.backend_id);
    for (const record of open) {
      const process = matching(processes, record);
      await this.finish(sandbox, record, process, process?.status === 'running' ? 'lost' : undefined);
    }
  }

  /** The sandbox's processes, asked only when some record's end is not yet known and it runs. */
  private async processes(sandbox: SandboxRecord, records: DetachedRecord[]): Promise<DetachedProcess[] | null> {
    if (records.every((record) => record.status !== null)) return [];
    if (sandbox.status !== 'running' || !sandbox.backend_id) return null;
    return this.detached().listDetached(sandbox.backend_id);
  }

  /**
   * A record brought up to date: an end the sandbox reports (or a process it no longer knows,
   * or a sandbox that no longer runs: `processes` null) is recorded now; a running one is
   * returned with the sandbox's view of it.
   */
  private async observe(sandbox: SandboxRecord, record: DetachedRecord, processes: DetachedProcess[] | null): Promise<DetachedRecord | Live> {
    if (record.status !== null) return record;
    const process = processes ? matching(processes, record) : undefined;
    if (process?.status === 'running') return { ...record, process };
    return this.finish(sandbox, record, process);
  }

  /** Records how a command ended, with its output where the sandbox still has it. */
  private async finish(sandbox: SandboxRecord, record: DetachedRecord, process: DetachedProcess | undefined, as?: 'lost'): Promise<DetachedRecord> {
    const now = isoNow(this.clock);
    const end = process && !as
      ? { status: process.status as Exclude<DetachedProcess['status'], 'running'>, exit_code: process.exit_code, finished_at: process.finished_at ?? now }
      : { status: 'lost' as const, exit_code: null, finished_at: now };
    const outputs: Partial<Record<Stream, DetachedLog>> = {};
    if (process && sandbox.backend_id) {
      for (const stream of ['stdout', 'stderr'] as const) {
        try {
          outputs[stream] = await this.detached().detachedLogs(sandbox.backend_id, process.id, stream);
        } catch (err) {
          this.logger.warn({ err, sandbox: sandbox.name, id: record.id, stream }, 'could not collect the output of a detached command');
        }
      }
    }
    if (!(await this.repo.finish(record.id, end, outputs))) return (await this.repo.byId(sandbox.uuid, record.id)) ?? { ...record, ...end };
    return { ...record, ...end };
  }

  /** The command's view and one stream's kept output, from the sandbox or the host. */
  private async read(sandbox: SandboxRecord, record: DetachedRecord, stream: Stream): Promise<{ command: DetachedCommandBody; log: DetachedLog }> {
    const current = await this.observe(sandbox, record, await this.processes(sandbox, [record]));
    if ('process' in current && sandbox.backend_id) {
      return { command: viewOf(sandbox, current), log: await this.detached().detachedLogs(sandbox.backend_id, current.process.id, stream) };
    }
    return { command: viewOf(sandbox, current), log: await this.repo.output(record.id, stream) };
  }

  /** The backend's detached commands; UNSUPPORTED where it has none. */
  private detached(): DetachedCapability {
    return requireCapability(this.backend, 'detached');
  }

  private async require(name: string, id: string): Promise<{ sandbox: SandboxRecord; record: DetachedRecord }> {
    const sandbox = await this.sandboxes.require(name);
    const record = await this.repo.byId(sandbox.uuid, id);
    if (!record) throw notFound(`detached command '${id}' not found in sandbox '${name}'`);
    return { sandbox, record };
  }
}

/** A command that still runs, with the sandbox's view of it. */
type Live = DetachedRecord & { process: DetachedProcess };

/** The sandbox's process for a record: same id and start time (ids restart with the sandbox). */
function matching(processes: DetachedProcess[], record: DetachedRecord): DetachedProcess | undefined {
  return processes.find((p) => p.id === record.process_id && p.started_at === record.started_at);
}

/** The API view of a detached command: its record with the sandbox's name, or the sandbox's view of it while it runs. */
function viewOf(sandbox: SandboxRecord, record: DetachedRecord | Live, started?: DetachedProcess): DetachedCommandBody {
  const process = started ?? ('process' in record ? record.process : undefined);
  if (process && record.status === null) {
    return view(detachedCommand, { ...record, sandbox: sandbox.name, status: process.status, exit_code: process.exit_code, finished_at: process.finished_at ?? null });
  }
  return view(detachedCommand, { ...record, sandbox: sandbox.name, status: record.status ?? 'lost' });
}
