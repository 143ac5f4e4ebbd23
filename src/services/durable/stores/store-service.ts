import type { ConfigSection } from '../../../config/config-schema.js';
import { mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Counter, Histogram } from 'prom-client';
import { v7 as uuidv7 } from 'uuid';
import { badRequest, conflict, forbidden, isServiceError, notFound, ServiceError } from '../../../errors.js';
import {
  DEFAULT_MAX_ROWS,
  store as storeSchema,
  type CommandInput,
  type CommandResultBody,
  type CreateStoreInput,
  type ExecuteInput,
  type ExecuteResultBody,
  type ListStoresQuery,
  type PatchStoreInput,
  type QueryInput,
  type QueryResultBody,
  type StoreBody,
} from '../../../schemas/store-schemas.js';
import { view } from '../../../schemas/view.js';
import type { SandboxRecord } from '../../../state/sandbox-repository.js';
import type { StoreRecord, StoreRepository, StoreStatus } from '../../../state/store-repository.js';
import type { Logger } from '../../../telemetry/logger.js';
import type { Repositories, ServiceContext } from '../../context.js';
import type { EventType } from '../../events/event-bus.js';
import { isoNow, type Clock } from '../../support/clock.js';
import { configView, endpointOf, engineConfigOf, hostOf, passwordFromEnv, scrubbed, splitCredentials, type Credentials } from './store-credentials.js';
import { STORE_KINDS, type StoreEngine, type StoreHandle, type StoreKind, type StoreOp, type StoreTarget } from './store-engine.js';
import { StoreHandles } from './store-handles.js';
import { StoreDestinations, type InternalCheck, type StoreResolver } from './store-destination.js';
import { checkPlacement, configuredHost, isEmbedded, sandboxAddress } from './store-placement.js';
import { commandResultOf, queryRows, statementBodies } from './store-results.js';

export interface StoreMetrics {
  storeOps: Pick<Counter<'kind' | 'op' | 'outcome'>, 'inc'>;
  storeOpDuration: Pick<Histogram<'kind' | 'op'>, 'observe'>;
}

export interface StoreServiceInput extends Pick<ServiceContext, 'clock' | 'logger' | 'bus' | 'sandboxes' | 'secrets'> {
  config: Pick<ConfigSection<'stores'>, 'storeTimeout' | 'storeAllowedHosts'>;
  repos: Pick<Repositories, 'stores' | 'sandboxes'>;
  /** One engine per kind this server offers; a kind without one is refused at create. */
  engines: readonly StoreEngine[];
  metrics: StoreMetrics;
  /** `<data-dir>/stores`: the files of the host's stores. */
  storesDir: string;
  /** Tells the timers driver that a handle has a new idle deadline (`handles` is its source). */
  poke: () => void;
  /** Where `password_env` is read; the server's environment by default. */
  env?: NodeJS.ProcessEnv;
  /** Which addresses are internal (the egress proxy's classification by default) and how names resolve (tests). */
  destinations?: { internal?: InternalCheck; resolve?: StoreResolver };
}

/**
 * Durable stores (docs/decisions.md, "Durable stores"): records, names, credentials, the
 * request envelope of query / execute / command, events and metrics, over one engine per kind
 * (store-engine.ts), which owns connections and speaks its database. Open handles are cached per
 * store in `handles`, a source of the timers driver that closes them when idle.
 */
export class StoreService {
  /** The open handles; registered with the timers driver by the wiring. */
  readonly handles: StoreHandles;
  private readonly repo: StoreRepository;
  private readonly engines = new Map<StoreKind, StoreEngine>();
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly env: NodeJS.ProcessEnv;
  private readonly timeoutMs: number;
  private readonly destinations: StoreDestinations;

  constructor(private readonly input: StoreServiceInput) {
    this.repo = input.repos.stores;
    this.clock = input.clock;
    this.logger = input.logger;
    this.env = input.env ?? process.env;
    this.timeoutMs = input.config.storeTimeout;
    this.destinations = new StoreDestinations(input.config.storeAllowedHosts, input.destinations?.internal, input.destinations?.resolve);
    for (const engine of input.engines) {
      if (this.engines.has(engine.kind)) throw new Error(`two store engines for kind ${engine.kind}`);
      this.engines.set(engine.kind, engine);
    }
    this.handles = new StoreHandles(input.clock, input.logger, input.poke);
    // Binding is ownership: a store goes with its sandbox, whatever path removed the sandbox.
    input.sandboxes.onRemoved((sandbox) => this.removeBoundTo(sandbox));
  }

  /** The kinds this server offers, in the API's order. */
  get kinds(): StoreKind[] {
    return STORE_KINDS.filter((kind) => this.engines.has(kind));
  }

  /** POST /stores. */
  async create(input: CreateStoreInput): Promise<StoreBody> {
    const engine = this.engineFor(input.kind);
    const credentials = splitCredentials(input.kind, input.config ?? {});
    const normalised = engine.checkConfig(credentials.engine);
    const sandbox = input.sandbox === undefined ? undefined : await this.input.sandboxes.require(input.sandbox);
    await checkPlacement(input.kind, normalised, sandbox, this.destinations);
    if (await this.repo.byName(input.name)) throw conflict(`store '${input.name}' exists already`);
    const id = uuidv7();
    const stamp = isoNow(this.clock);
    const record: StoreRecord = {
      id,
      name: input.name,
      kind: input.kind,
      sandbox: sandbox?.name ?? null,
      sandbox_uuid: sandbox?.uuid ?? null,
      config: withServiceFields(normalised, credentials),
      secret: credentials.password === undefined ? null : this.seal(id, credentials.password),
      status: 'ok',
      created_at: stamp,
      updated_at: stamp,
    };
    const validate = input.validate ?? true;
    const target = this.baseTarget(record);
    if (validate) Object.assign(target, await this.connectionOf(record, credentials.password, 'create'));
    if (isEmbedded(record.kind)) mkdirSync(this.input.storesDir, { recursive: true });
    try {
      await engine.prepare(target, validate);
    } catch (err) {
      throw scrubbed(err, target.password);
    }
    try {
      await this.repo.insert(record);
    } catch (err) {
      await engine.destroy(this.baseTarget(record)).catch(() => undefined);
      if ((err as { code?: string }).code === 'SQLITE_CONSTRAINT_UNIQUE') throw conflict(`store '${input.name}' exists already`);
      throw err;
    }
    this.publish('store.created', record, {});
    this.logger.info({ store: record.name, id, kind: record.kind, sandbox: record.sandbox }, 'store created');
    return this.viewOf(record);
  }

  /** GET /stores, in name order. */
  async list(query: ListStoresQuery = {}): Promise<StoreBody[]> {
    const records = await this.repo.list(query);
    return Promise.all(records.map((record) => this.viewOf(record)));
  }

  /** GET /stores/{id}: by id, else by name. */
  async get(idOrName: string): Promise<StoreBody> {
    return this.viewOf(await this.require(idOrName));
  }

  /** The store with this id, else this name; NOT_FOUND otherwise. */
  async require(idOrName: string): Promise<StoreRecord> {
    const record = (await this.repo.byId(idOrName)) ?? (await this.repo.byName(idOrName));
    if (!record) throw notFound(`store '${idOrName}' not found`);
    return record;
  }

  /**
   * PATCH /stores/{id}: the config merged (RFC 7396: null removes a field), checked by the engine
   * again; a new password replaces the kept one (or password_env, and the other way round);
   * the open handle is closed, so the next call connects with the new settings. A store moved to
   * another server (host or port) takes its password again: the kept one (sealed, or the
   * server's variable) is never sent to a server the caller names (issue 25: a caller who may
   * patch a store but not read its password would otherwise receive it at a server of theirs).
   */
  async update(idOrName: string, patch: PatchStoreInput): Promise<StoreBody> {
    const current = await this.require(idOrName);
    const engine = this.engineOf(current);
    const given = splitCredentials(current.kind, patch.config);
    const merged = mergePatch(current.config, patch.config);
    // A store has one source of its password: giving one replaces the other.
    if (given.password !== undefined && given.passwordEnv === undefined) delete merged.password_env;
    const credentials = splitCredentials(current.kind, merged);
    const keeps = credentials.password === undefined && given.passwordEnv === undefined && !given.clearPassword;
    if (keeps && (current.secret !== null || typeof merged.password_env === 'string') && endpointOf(merged) !== endpointOf(current.config)) {
      throw badRequest('config: a store moved to another server (host or port) takes its password again: give config.password or config.password_env (or null for none); the kept one is never sent to a new server');
    }
    const normalised = engine.checkConfig(credentials.engine);
    const sandbox = current.sandbox === null ? undefined : await this.boundSandbox(current);
    await checkPlacement(current.kind, normalised, sandbox, this.destinations);
    let secret = current.secret;
    if (credentials.password !== undefined) secret = this.seal(current.id, credentials.password);
    else if (given.clearPassword || given.passwordEnv !== undefined) secret = null;
    const fields = { config: withServiceFields(normalised, credentials), secret, status: 'ok' as StoreStatus, updated_at: isoNow(this.clock) };
    await this.repo.update(current.id, fields);
    await this.handles.close(current.id);
    return this.viewOf({ ...current, ...fields });
  }

  /**
   * DELETE /stores/{id}: the handle is closed, the record forgotten, then the engine removes what
   * is the store's own (the file of a host store; nothing on an external server).
   */
  async remove(idOrName: string): Promise<string> {
    const record = await this.require(idOrName);
    await this.forget(record, 'deleted');
    return `store '${record.name}' deleted`;
  }

  /** POST /stores/{id}/query: read-only, enforced by the engine. */
  async query(idOrName: string, body: QueryInput): Promise<QueryResultBody> {
    const started = performance.now();
    return this.operate(idOrName, 'query', async (handle) => {
      const set = await required(handle, 'query')({
        sql: body.sql,
        params: body.params ?? [],
        maxRows: body.max_rows ?? DEFAULT_MAX_ROWS,
        timeoutMs: body.timeout_ms ?? this.timeoutMs,
      });
      const { rows, truncated, warnings } = queryRows(set);
      return { columns: set.columns, rows, row_count: rows.length, truncated, column_types: set.column_types, ...(warnings ? { warnings } : {}), duration_ms: elapsedMs(started) };
    });
  }

  /** POST /stores/{id}/execute: one statement, or a batch (in one transaction unless told otherwise). */
  async execute(idOrName: string, body: ExecuteInput): Promise<ExecuteResultBody> {
    const started = performance.now();
    if (body.sql === undefined && body.statements === undefined) throw badRequest('sql: is required (or statements, for a batch)');
    if (body.sql !== undefined && body.statements !== undefined) throw badRequest('statements: give sql or statements, not both');
    if (body.statements !== undefined && body.params !== undefined) throw badRequest('params: a batch takes the params of each statement in statements[].params');
    if (body.sql !== undefined && body.transaction !== undefined) throw badRequest('transaction: applies to a batch (statements) only');
    const statements = body.statements ?? [{ sql: body.sql!, params: body.params }];
    return this.operate(idOrName, 'execute', async (handle, record) => {
      if (record.config.read_only === true) throw forbidden(`store '${record.name}' is read-only`);
      const results = await required(handle, 'execute')({
        statements: statements.map((statement) => ({ sql: statement.sql, params: statement.params ?? [] })),
        transaction: body.transaction ?? true,
        maxRows: body.max_rows ?? DEFAULT_MAX_ROWS,
        timeoutMs: body.timeout_ms ?? this.timeoutMs,
      });
      const bodies = statementBodies(results);
      if (body.statements === undefined) return { ...bodies[0]!, duration_ms: elapsedMs(started) };
      const rowsAffected = bodies.reduce((sum, result) => sum + result.rows_affected, 0);
      return { results: bodies, rows_affected: rowsAffected, duration_ms: elapsedMs(started) };
    });
  }

  /** POST /stores/{id}/command: a command of a kv, queue or redis store. */
  async command(idOrName: string, body: CommandInput): Promise<CommandResultBody> {
    const [name] = body.command;
    if (typeof name !== 'string' || name === '') throw badRequest('command[0]: must be the command name, a string such as "GET"');
    return this.operate(idOrName, 'command', async (handle, record, engine) => {
      if (record.config.read_only === true && (engine.commandWrites?.(body.command) ?? true)) {
        throw forbidden(`store '${record.name}' is read-only: ${name.toUpperCase()} writes`);
      }
      return commandResultOf(await required(handle, 'command')({ command: body.command, timeoutMs: body.timeout_ms ?? this.timeoutMs }));
    });
  }

  /**
   * At start: deletes the stores whose sandbox is gone although no removal hook ran (a server
   * stopped in the middle of removing it, which recovery then finished). Returns how many.
   */
  async recover(): Promise<number> {
    let removed = 0;
    for (const record of await this.repo.list()) {
      if (record.sandbox_uuid === null || (await this.input.repos.sandboxes.byUuid(record.sandbox_uuid))) continue;
      await this.forget(record, 'sandbox deleted');
      removed++;
    }
    return removed;
  }

  /** Closes every open handle and stops the engines' background work (server shutdown). */
  async close(): Promise<void> {
    await this.handles.closeAll();
    await Promise.all([...this.engines.values()].map((engine) => engine.shutdown?.()));
  }

  /**
   * Runs one operation on a store's handle (opened on first use), with the op checked against
   * the kind, the outcome counted and timed, an external store's status kept from how it went,
   * and a driver's exception (logged, never answered) scrubbed of the password.
   */
  private async operate<T>(idOrName: string, op: StoreOp, work: (handle: StoreHandle, record: StoreRecord, engine: StoreEngine) => Promise<T>): Promise<T> {
    const record = await this.require(idOrName);
    const started = performance.now();
    let outcome = 'ok';
    let reached = false;
    try {
      const engine = this.engineOf(record);
      if (!engine.ops.includes(op)) throw wrongOp(record, op, engine);
      return await this.handles.use(
        record,
        async () => engine.open({ ...this.baseTarget(record), ...(await this.connectionOf(record, undefined, 'open')) }),
        (handle) => {
          reached = true;
          return work(handle, record, engine);
        },
      );
    } catch (err) {
      outcome = isServiceError(err) ? err.code.toLowerCase() : 'internal';
      reached ||= outcome === 'store_unavailable';
      throw scrubbed(err, this.passwordQuietly(record));
    } finally {
      this.input.metrics.storeOps.inc({ kind: record.kind, op, outcome });
      this.input.metrics.storeOpDuration.observe({ kind: record.kind, op }, (performance.now() - started) / 1000);
      if (reached && !isEmbedded(record.kind)) await this.keepStatus(record, outcome === 'store_unavailable' ? 'unreachable' : 'ok');
    }
  }

  /** The engine of a kind; 400 naming `kind` when this server has none for it. */
  private engineFor(kind: StoreKind): StoreEngine {
    const engine = this.engines.get(kind);
    if (!engine) {
      const known = this.kinds;
      throw badRequest(`kind: this server has no ${kind} stores (kinds: ${known.length > 0 ? known.join(', ') : 'none'})`);
    }
    return engine;
  }

  /** The engine of a kept store; 422 when this server runs without one for its kind (it can only be deleted). */
  private engineOf(record: StoreRecord): StoreEngine {
    const engine = this.engines.get(record.kind);
    if (!engine) throw new ServiceError('UNSUPPORTED', `store '${record.name}' is a ${record.kind} store, and this server has no ${record.kind} engine`);
    return engine;
  }

  /** What every engine call on the store is told, without credentials or a resolved address. */
  private baseTarget(record: StoreRecord): StoreTarget {
    return {
      id: record.id,
      name: record.name,
      kind: record.kind,
      config: engineConfigOf(record.config),
      file: join(this.input.storesDir, `${record.id}.sqlite`),
      ...(record.sandbox ? { sandbox: record.sandbox } : {}),
    };
  }

  /**
   * The password and the default host an external store connects with. At create the password
   * is the one just given (a missing password_env variable is then 400 naming the field).
   */
  private async connectionOf(record: StoreRecord, given: string | undefined, when: 'create' | 'open'): Promise<Pick<StoreTarget, 'password' | 'defaultHost' | 'address'>> {
    if (isEmbedded(record.kind)) return {};
    let password = given;
    if (password === undefined && record.secret !== null) password = this.input.secrets.open(record.secret, aadOf(record.id));
    if (password === undefined) {
      try {
        password = passwordFromEnv(record, record.config.password_env, this.env);
      } catch (err) {
        if (when === 'create') throw badRequest(`config.password_env: the server has no environment variable ${String(record.config.password_env)}`);
        throw err;
      }
    }
    const needsAddress = record.sandbox !== null && hostOf(engineConfigOf(record.config)) === undefined;
    const defaultHost = needsAddress ? await sandboxAddress(this.input.sandboxes, record.kind, record.name, record.sandbox!) : undefined;
    // The configured host, checked again now and pinned: the engine connects to this address.
    const configured = configuredHost(engineConfigOf(record.config), record.sandbox !== null);
    const address = configured ? await this.destinations.check(configured.host, configured.field) : undefined;
    return { ...(password !== undefined ? { password } : {}), ...(defaultHost ? { defaultHost } : {}), ...(address ? { address } : {}) };
  }

  /** The kept password, for scrubbing errors; undefined when there is none or it does not open. */
  private passwordQuietly(record: StoreRecord): string | undefined {
    try {
      if (record.secret !== null) return this.input.secrets.open(record.secret, aadOf(record.id));
      return typeof record.config.password_env === 'string' ? this.env[record.config.password_env] : undefined;
    } catch {
      return undefined;
    }
  }

  private seal(id: string, password: string): string {
    return this.input.secrets.seal(password, aadOf(id));
  }

  /** The sandbox a store is bound to (it exists: a store goes with its sandbox). */
  private async boundSandbox(record: StoreRecord): Promise<SandboxRecord> {
    return this.input.sandboxes.require(record.sandbox!);
  }

  /** Writes an external store's status when it changed. */
  private async keepStatus(record: StoreRecord, status: StoreStatus): Promise<void> {
    if (record.status === status) return;
    await this.repo.update(record.id, { status }).catch((err: Error) => this.logger.warn({ store: record.name, err: err.message }, 'store status not kept'));
  }

  /** Closes the store's handle, deletes its record, lets the engine remove its own, and says so on the bus. */
  private async forget(record: StoreRecord, reason: string): Promise<void> {
    await this.handles.retire(record.id);
    if (!(await this.repo.delete(record.id))) return;
    const engine = this.engines.get(record.kind);
    try {
      await engine?.destroy(this.baseTarget(record));
    } catch (err) {
      this.logger.error({ store: record.name, id: record.id, err: scrubbed(err, this.passwordQuietly(record)) }, 'store files not removed');
    }
    this.publish('store.deleted', record, { reason });
    this.logger.info({ store: record.name, id: record.id, reason }, 'store deleted');
  }

  /** The sandbox-removal hook: the stores bound to it go too. A failure is logged, never stops the removal. */
  private async removeBoundTo(sandbox: SandboxRecord): Promise<void> {
    for (const record of await this.repo.boundTo(sandbox.uuid)) {
      try {
        await this.forget(record, 'sandbox deleted');
      } catch (err) {
        this.logger.error({ store: record.name, sandbox: sandbox.name, err }, 'store of a removed sandbox not deleted');
      }
    }
  }

  private publish(type: Extract<EventType, `store.${string}`>, record: StoreRecord, metadata: Record<string, unknown>): void {
    this.input.bus.publish({
      type,
      timestamp: isoNow(this.clock),
      sandbox: record.sandbox ?? '',
      sandbox_uuid: record.sandbox_uuid ?? '',
      resource: { kind: 'store', id: record.id, name: record.name },
      labels: {},
      metadata: { kind: record.kind, ...metadata },
    });
  }

  private async viewOf(record: StoreRecord): Promise<StoreBody> {
    return view(storeSchema, {
      ...record,
      config: configView(record.config, record.secret !== null),
      size_bytes: isEmbedded(record.kind) ? await this.sizeOf(record) : undefined,
      status: isEmbedded(record.kind) ? undefined : record.status,
    });
  }

  /** Bytes on disk of a host store: its open handle's figure, else its file and WAL; undefined when it has none here. */
  private async sizeOf(record: StoreRecord): Promise<number | undefined> {
    const handle = this.handles.peek(record.id);
    if (handle?.sizeBytes) return handle.sizeBytes().catch(() => undefined);
    const file = this.baseTarget(record).file;
    let total: number | undefined;
    for (const path of [file, `${file}-wal`]) {
      try {
        total = (total ?? 0) + statSync(path).size;
      } catch {
        // No such file: a store in a sandbox, or no WAL now.
      }
    }
    return total;
  }
}

/** The AAD a store's password is sealed with: a sealed value copied to another store does not open. */
const aadOf = (id: string) => `store:${id}:password`;

/** The normalised engine config with the service's own fields (never the password). */
function withServiceFields(normalised: Record<string, unknown>, credentials: Credentials): Record<string, unknown> {
  return {
    ...normalised,
    ...(credentials.passwordEnv !== undefined ? { password_env: credentials.passwordEnv } : {}),
    ...(credentials.readOnly !== undefined ? { read_only: credentials.readOnly } : {}),
  };
}

/** RFC 7396 JSON merge patch: objects merge field by field, null removes a field, anything else replaces. */
export function mergePatch(target: Record<string, unknown>, patch: Record<string, unknown>): Record<string, unknown> {
  const merged: Record<string, unknown> = { ...target };
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete merged[key];
    else if (isPlainObject(value) && isPlainObject(merged[key])) merged[key] = mergePatch(merged[key] as Record<string, unknown>, value);
    else merged[key] = value;
  }
  return merged;
}

const isPlainObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** 422 naming the route the store's kind answers. */
function wrongOp(record: StoreRecord, op: StoreOp, engine: StoreEngine): ServiceError {
  const ops = engine.ops.filter((answered) => answered !== op);
  return new ServiceError('UNSUPPORTED', `${op}: store '${record.name}' is a ${record.kind} store`, { hint: { action: 'store_ops', store: record.name, ops } });
}

/** The handle's method for an op its engine declares, bound to it; a handle without it is a bug of its engine. */
function required<K extends StoreOp>(handle: StoreHandle, op: K): NonNullable<StoreHandle[K]> {
  const method = handle[op] as ((...args: never[]) => unknown) | undefined;
  if (!method) throw new ServiceError('INTERNAL', `the store engine declares ${op} but its handle has no ${op}()`);
  return method.bind(handle) as NonNullable<StoreHandle[K]>;
}

const elapsedMs = (started: number) => Math.round(performance.now() - started);
