import { randomBytes } from 'node:crypto';
import type { Backend, TerminalSession } from '../../backends/backend.js';
import type { Principal } from '../../domain/principals.js';
import { ServiceError, badRequest } from '../../errors.js';
import type { SandboxRecord } from '../../state/sandbox-repository.js';
import type { ServiceContext } from '../context.js';
import type { AuditApi } from '../events/api.js';
import type { SandboxesApi } from '../sandboxes/api.js';
import { requireCapability } from '../support/capabilities.js';
import type { Clock } from '../support/clock.js';
import type { ExecApi } from '../commands/api.js';

/** How long a terminal token may wait for its one use. */
export const TERMINAL_TOKEN_TTL_MS = 60_000;

/** At most this often, typing at a terminal counts as the sandbox's activity (idle policies). */
const ACTIVITY_EVERY_MS = 30_000;

/** Bounds of a terminal's columns and rows (the agent's too). */
export const MAX_TERMINAL_SIDE = 1000;

/** A token minted for a browser, which cannot set the Authorization header of a WebSocket. */
interface TerminalToken {
  sandbox: string;
  principal: Principal;
  expiresAt: number;
}

/**
 * A terminal as the faces use it: its output is held until a reader attaches (the session
 * starts before the WebSocket upgrade, so that a refusal is an HTTP answer).
 */
export interface Terminal {
  write(data: Buffer): void;
  resize(cols: number, rows: number): void;
  /** Holds the terminal's output back while the reader is slow (see TerminalSession). */
  pause(): void;
  resume(): void;
  /** Starts the flow of output to `listener`, with what was held so far first. */
  attach(listener: (data: Buffer) => void): void;
  /** The shell's exit code; null when the terminal was closed (by the client or a stop) first. */
  readonly exited: Promise<number | null>;
  close(): void;
}

/**
 * Interactive shells in running sandboxes (the backend's `terminal` capability), the one-use
 * tokens that let a browser open one, and the terminals of each sandbox, which its stop or
 * removal closes.
 */
export class TerminalService {
  private readonly backend: Backend;
  private readonly sandboxes: SandboxesApi;
  private readonly exec: ExecApi;
  private readonly audit: AuditApi;
  private readonly clock: Clock;
  private readonly tokens = new Map<string, TerminalToken>();
  private readonly running = new Map<string, Set<Terminal>>();

  constructor(ctx: Pick<ServiceContext, 'backend' | 'sandboxes' | 'audit' | 'clock' | 'exec'>) {
    this.backend = ctx.backend;
    this.sandboxes = ctx.sandboxes;
    this.exec = ctx.exec;
    this.audit = ctx.audit;
    this.clock = ctx.clock;
    ctx.sandboxes.onBeforeStop(async (sandbox) => this.closeAll(sandbox.uuid));
    ctx.sandboxes.onRemoved(async (sandbox) => this.closeAll(sandbox.uuid));
  }

  /**
   * Starts the sandbox's shell on a terminal of `cols` x `rows`, as its default user in its
   * working directory, with the environment of its commands. NOT_FOUND for an unknown sandbox,
   * CONFLICT for a stopped one, BAD_REQUEST for a size outside 1-1000.
   */
  async open(name: string, size: { cols: number; rows: number }): Promise<Terminal> {
    checkSize(size.cols, size.rows);
    const sandbox = await this.sandboxes.requireRunning(name);
    const terminals = requireCapability(this.backend, 'terminal');
    let held: Buffer[] | undefined = [];
    let listener: ((data: Buffer) => void) | undefined;
    const session = await terminals.openTerminal(sandbox.backend_id, {
      ...size,
      env: await this.exec.envOf(sandbox),
      onOutput: (data) => (listener ? listener(data) : held?.push(Buffer.from(data))),
    });
    const terminal = this.track(sandbox, session, {
      attach: (next) => {
        for (const data of held ?? []) next(data);
        held = undefined;
        listener = next;
      },
    });
    try {
      await this.sandboxes.touch(sandbox);
      await this.audit.record('terminal_opened', sandbox, { cols: size.cols, rows: size.rows });
    } catch (err) {
      terminal.close();
      throw err;
    }
    return terminal;
  }

  /** A token that opens one terminal on `name` for `principal`, once, within 60 s. */
  async mintToken(name: string, principal: Principal): Promise<{ token: string; expires_at: string }> {
    const sandbox = await this.sandboxes.requireRunning(name);
    this.sweep();
    const token = randomBytes(24).toString('base64url');
    const expiresAt = this.clock().getTime() + TERMINAL_TOKEN_TTL_MS;
    this.tokens.set(token, { sandbox: sandbox.name, principal, expiresAt });
    return { token, expires_at: new Date(expiresAt).toISOString() };
  }

  /**
   * The principal a token was minted for, if it is valid for `name`; it cannot be used again.
   * UNAUTHORIZED for an unknown, used or expired token, or one minted for another sandbox.
   */
  redeem(token: string, name: string): Principal {
    const entry = this.tokens.get(token);
    this.tokens.delete(token);
    if (!entry) throw new ServiceError('UNAUTHORIZED', 'invalid terminal token: it is unknown or was used already', { hint: { action: 'mint_terminal_token', sandbox: name } });
    if (entry.expiresAt <= this.clock().getTime()) throw new ServiceError('UNAUTHORIZED', 'terminal token expired: tokens are valid for 60 s');
    if (entry.sandbox !== name) throw new ServiceError('UNAUTHORIZED', `terminal token was minted for sandbox '${entry.sandbox}', not '${name}'`);
    return entry.principal;
  }

  /** Closes every terminal (the server shuts down). */
  close(): void {
    for (const uuid of [...this.running.keys()]) this.closeAll(uuid);
  }

  private track(sandbox: SandboxRecord, session: TerminalSession, extra: Pick<Terminal, 'attach'>): Terminal {
    const set = this.running.get(sandbox.uuid) ?? new Set<Terminal>();
    this.running.set(sandbox.uuid, set);
    let touched = this.clock().getTime();
    const terminal: Terminal = {
      write: (data) => {
        session.write(data);
        const now = this.clock().getTime();
        if (now - touched < ACTIVITY_EVERY_MS) return;
        touched = now;
        void this.sandboxes.touch(sandbox).catch(() => undefined);
      },
      resize: (cols, rows) => {
        checkSize(cols, rows);
        session.resize(cols, rows);
      },
      pause: () => session.pause(),
      resume: () => session.resume(),
      attach: extra.attach,
      exited: session.exited,
      close: () => session.close(),
    };
    set.add(terminal);
    void session.exited.finally(() => {
      set.delete(terminal);
      if (set.size === 0 && this.running.get(sandbox.uuid) === set) this.running.delete(sandbox.uuid);
    });
    return terminal;
  }

  private closeAll(uuid: string): void {
    for (const terminal of this.running.get(uuid) ?? []) terminal.close();
  }

  private sweep(): void {
    const now = this.clock().getTime();
    for (const [token, entry] of this.tokens) if (entry.expiresAt <= now) this.tokens.delete(token);
  }
}

function checkSize(cols: number, rows: number): void {
  const ok = (n: number) => Number.isInteger(n) && n >= 1 && n <= MAX_TERMINAL_SIDE;
  if (!ok(cols) || !ok(rows)) throw badRequest(`cols and rows: whole numbers from 1 to ${MAX_TERMINAL_SIDE} (got ${cols}x${rows})`);
}
