import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { badRequest, ServiceError } from '../../src/errors.js';
import type {
  CommandRequest,
  ExecuteRequest,
  QueryRequest,
  RowSet,
  StatementResult,
  StoreEngine,
  StoreHandle,
  StoreKind,
  StoreOp,
  StoreTarget,
} from '../../src/services/durable/stores/index.js';

/** What the double recorded: every engine call with the target it was given. */
export type DoubleCall =
  | { op: 'checkConfig'; config: Record<string, unknown> }
  | { op: 'prepare'; target: StoreTarget; validate: boolean }
  | { op: 'open'; target: StoreTarget }
  | { op: 'close'; id: string }
  | { op: 'destroy'; target: StoreTarget }
  | { op: 'query'; id: string; request: QueryRequest }
  | { op: 'execute'; id: string; request: ExecuteRequest }
  | { op: 'command'; id: string; request: CommandRequest }
  | { op: 'shutdown' };

const CONFIG_FIELDS = new Set(['host', 'port', 'url', 'database', 'user', 'ssl', 'max_bytes', 'path']);
/** Commands of the double's tiny key-value language that only read (any other counts as a write). */
const READS = new Set(['GET', 'PING', 'BIG']);

/**
 * A TEST DOUBLE of a store engine, for unit tests of the service layer only: no database is
 * behind it. It records every call, keeps a key-value map per store for command kinds, and
 * answers queries with what `onQuery` returns (by default one row echoing the SQL and params).
 * Scripted failures: config.host `unreachable.test` fails prepare with validate and every open
 * (STORE_UNAVAILABLE), `down.test` fails only opens; `leaky.test` throws errors that carry the
 * password (the service must scrub them). Embedded kinds write `target.file` at prepare.
 */
export class StoreEngineDouble implements StoreEngine {
  readonly calls: DoubleCall[] = [];
  readonly ops: readonly StoreOp[];
  /** What a query answers; replace to script rows. */
  onQuery: (request: QueryRequest) => RowSet = (request) => ({
    columns: ['sql', 'params'],
    column_types: ['text', 'text'],
    rows: [[request.sql, JSON.stringify(request.params)]],
    truncated: false,
  });
  /** What an execute answers; replace to script results. */
  onExecute: (request: ExecuteRequest) => StatementResult[] = (request) =>
    request.statements.map((_, index) => ({ rows_affected: 1, last_insert_id: index + 1 }));
  private readonly data = new Map<string, Map<string, unknown>>();

  constructor(
    readonly kind: StoreKind,
    ops?: readonly StoreOp[],
  ) {
    this.ops = ops ?? (['kv', 'queue', 'redis'].includes(kind) ? ['command'] : ['query', 'execute']);
  }

  checkConfig(config: Record<string, unknown>): Record<string, unknown> {
    this.calls.push({ op: 'checkConfig', config });
    for (const key of Object.keys(config)) if (!CONFIG_FIELDS.has(key)) throw badRequest(`config.${key}: unknown field`);
    if (config.port !== undefined && (typeof config.port !== 'number' || !Number.isInteger(config.port))) throw badRequest('config.port: must be an integer');
    return { ...config, ...(this.embedded ? {} : { port: config.port ?? 5432 }) };
  }

  async prepare(target: StoreTarget, validate: boolean): Promise<void> {
    this.calls.push({ op: 'prepare', target, validate });
    if (validate && target.config.host === 'unreachable.test') {
      throw badRequest(`config: cannot connect to ${this.kind} at unreachable.test:${String(target.config.port)}: ECONNREFUSED (create with validate: false to skip this check)`);
    }
    // A driver's own exception that carries the password (the service scrubs it: it is logged, never answered).
    if (validate && target.config.host === 'leaky.test') throw new Error(`login refused for password ${target.password}`);
    if (this.embedded) writeFileSync(target.file, 'double');
  }

  async open(target: StoreTarget): Promise<StoreHandle> {
    this.calls.push({ op: 'open', target });
    const host = target.config.host;
    if (host === 'unreachable.test' || host === 'down.test') {
      throw new ServiceError('STORE_UNAVAILABLE', `${this.kind} store '${target.name}' at ${String(host)}:${String(target.config.port)}: ECONNREFUSED`);
    }
    const data = this.data.get(target.id) ?? new Map<string, unknown>();
    this.data.set(target.id, data);
    const leaky = host === 'leaky.test';
    const handle: StoreHandle = {
      close: async () => {
        this.calls.push({ op: 'close', id: target.id });
      },
    };
    if (this.ops.includes('query')) {
      handle.query = async (request) => {
        this.calls.push({ op: 'query', id: target.id, request });
        if (leaky) throw new Error(`driver failed on user:${target.password}@db`);
        return this.onQuery(request);
      };
      handle.execute = async (request) => {
        this.calls.push({ op: 'execute', id: target.id, request });
        return this.onExecute(request);
      };
    }
    if (this.ops.includes('command')) {
      handle.command = async (request) => {
        this.calls.push({ op: 'command', id: target.id, request });
        return this.run(data, request.command);
      };
    }
    if (this.embedded) handle.sizeBytes = async () => 4096;
    return handle;
  }

  async destroy(target: StoreTarget): Promise<void> {
    this.calls.push({ op: 'destroy', target });
    this.data.delete(target.id);
    if (this.embedded && existsSync(target.file)) rmSync(target.file);
  }

  commandWrites(command: unknown[]): boolean {
    return !READS.has(String(command[0]).toUpperCase());
  }

  async shutdown(): Promise<void> {
    this.calls.push({ op: 'shutdown' });
  }

  /** The recorded calls of one op. */
  callsOf<O extends DoubleCall['op']>(op: O): Extract<DoubleCall, { op: O }>[] {
    return this.calls.filter((call): call is Extract<DoubleCall, { op: O }> => call.op === op);
  }

  private get embedded(): boolean {
    return ['sqlite', 'kv', 'queue'].includes(this.kind);
  }

  /** GET k, SET k v, DEL k, PING, BIG n (a string of n bytes); anything else is refused by name. */
  private run(data: Map<string, unknown>, command: unknown[]): unknown {
    const [name, ...args] = command;
    switch (String(name).toUpperCase()) {
      case 'GET':
        return data.get(String(args[0])) ?? null;
      case 'SET':
        data.set(String(args[0]), args[1]);
        return 'OK';
      case 'DEL':
        return data.delete(String(args[0])) ? 1 : 0;
      case 'PING':
        return 'PONG';
      case 'BIG':
        return 'x'.repeat(Number(args[0]));
      default:
        throw badRequest(`command: unknown command '${String(name)}'`);
    }
  }
}
