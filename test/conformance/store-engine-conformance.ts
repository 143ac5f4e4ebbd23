import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ErrorCode } from '../../src/errors.js';
import { STORE_KINDS, type StoreEngine, type StoreHandle, type StoreTarget } from '../../src/services/durable/stores/store-engine.js';
import { failure, visible } from '../helpers/store-engines.js';
import { commandCases, type CommandDialect } from './store-command-cases.js';
import { sqlCases, type SqlDialect } from './store-sql-cases.js';

/**
 * One conformance suite for every store engine (store-engine.ts is the contract): the ops an
 * engine declares and the handle it opens, config checks, where a store lives (a file on the
 * host, a server, a sandbox), and for each family of ops the same cases: read-only refusals,
 * time limits, row and size caps, value types and the shape of errors. A test file per engine
 * calls `storeEngineConformance` with a subject; a case the engine cannot run is skipped with
 * the reason the subject gives.
 */
export interface StoreEngineSubject {
  /** Shown in the suite's title. */
  title: string;
  /** Makes the engine under test (and whatever it needs: a database, a sandbox); shut down after the suite. */
  make(): Promise<StoreEngine>;
  /**
   * The target of a new store of this subject, with `config` added to what every store of it
   * needs (host, database, path), checked by the engine. Each call names a new store.
   */
  target(engine: StoreEngine, config?: Record<string, unknown>): StoreTarget;
  /** Where the store's data lives. */
  placement: HostFile | Server | InSandbox;
  /** The SQL kinds (query + execute). */
  sql?: SqlDialect;
  /** The command kinds. */
  commands?: CommandDialect;
  /** Removes what the run left behind (databases, keys, sandboxes). */
  cleanup(): Promise<void>;
}

/** A case the subject cannot run, and why. */
export interface Skip {
  skip: string;
}

/** A store in a SQLite file on the host (`target.file`), made at prepare and removed at destroy. */
export interface HostFile {
  kind: 'host-file';
}

/** A store on a database server the engine connects to. */
export interface Server {
  kind: 'server';
  /** A host and port where nothing listens. */
  closed: { host: string; port: number };
}

/** A store whose file lives in its bound sandbox; the file is the sandbox's and stays at destroy. */
export interface InSandbox {
  kind: 'sandbox';
  /** Whether the file exists in the sandbox. */
  fileExists(path: string): Promise<boolean>;
}

/** The codes an engine may throw (store-engine.ts); anything else is a bug of the engine. */
export const CONTRACT_CODES: readonly ErrorCode[] = ['SQL_ERROR', 'READ_ONLY', 'STORE_UNAVAILABLE', 'TIMEOUT', 'BAD_REQUEST', 'PAYLOAD_TOO_LARGE', 'BUSY'];

/** The ServiceError a promise rejects with, checked to carry a contract code. */
export async function refusal(promise: Promise<unknown>) {
  const err = await failure(promise);
  expect(CONTRACT_CODES, `${err.code}: ${err.message}`).toContain(err.code);
  return err;
}

/** What the family cases share: the engine, a store opened for the suite, and ways to make more. */
export interface SuiteContext {
  subject: StoreEngineSubject;
  engine(): StoreEngine;
  /** The store the family cases share (prepared and open). */
  store(): StoreHandle;
  /** Prepares and opens another store of the subject; closed and destroyed after the suite. */
  newStore(config?: Record<string, unknown>): Promise<{ target: StoreTarget; handle: StoreHandle }>;
}

/** A password no server message holds by chance. */
const PASSWORD = `Pw-conformance-${randomBytes(6).toString('hex')}`;

/** A unique name for a store, a key or a table of this run. */
export const uniqueName = (prefix: string) => `${prefix}_${randomBytes(4).toString('hex')}`;

/** Defines the suite for one engine. */
export function storeEngineConformance(subject: StoreEngineSubject): void {
  describe(`store engine conformance: ${subject.title}`, () => {
    let engine: StoreEngine;
    let shared: StoreHandle;
    const made: { target: StoreTarget; handle: StoreHandle }[] = [];

    const newStore = async (config: Record<string, unknown> = {}) => {
      const target = subject.target(engine, config);
      await engine.prepare(target, true);
      const opened = { target, handle: await engine.open(target) };
      made.push(opened);
      return opened;
    };
    const context: SuiteContext = { subject, engine: () => engine, store: () => shared, newStore };

    beforeAll(async () => {
      engine = await subject.make();
      shared = (await newStore()).handle;
    });
    afterAll(async () => {
      for (const { target, handle } of made) {
        await handle.close().catch(() => undefined);
        await engine?.destroy(target).catch(() => undefined);
      }
      await engine?.shutdown?.();
      await subject.cleanup();
    });

    describe('the contract', () => {
      it('is one of the store kinds and answers query + execute, or command', () => {
        expect(STORE_KINDS).toContain(engine.kind);
        expect([['query', 'execute'], ['command']]).toContainEqual([...engine.ops]);
        expect(engine.ops.includes('command')).toBe(subject.commands !== undefined);
        expect(engine.ops.includes('query')).toBe(subject.sql !== undefined);
        // A command kind says which commands write; the service refuses those on a read-only store.
        expect(typeof engine.commandWrites === 'function').toBe(engine.ops.includes('command'));
      });

      it('opens a handle with exactly the methods of its ops, closed twice without harm', async () => {
        const { handle } = await newStore();
        for (const op of ['query', 'execute', 'command'] as const) {
          expect(typeof handle[op] === 'function', op).toBe(engine.ops.includes(op));
        }
        await handle.close();
        await handle.close();
      });

      it('refuses an unknown config field, naming it', async () => {
        const err = await refusal(Promise.resolve().then(() => subject.target(engine, { no_such_field: 1 })));
        expect(err.code).toBe('BAD_REQUEST');
        expect(err.message).toMatch(/^config\.no_such_field\b/);
      });

      it('takes its own checked config back unchanged (the service keeps it and checks it again at PATCH and open)', () => {
        const checked = subject.target(engine).config;
        expect(engine.checkConfig(checked)).toEqual(checked);
        expect(engine.checkConfig(engine.checkConfig(checked))).toEqual(checked);
      });
    });

    placementCases(subject, context);
    if (subject.sql) sqlCases(context, subject.sql);
    if (subject.commands) commandCases(context, subject.commands);
  });
}

function placementCases(subject: StoreEngineSubject, context: SuiteContext): void {
  const { placement } = subject;
  describe(`where a store lives: ${placement.kind}`, () => {
    if (placement.kind === 'host-file') {
      it('makes its file at prepare, measures it, and removes it with its WAL files at destroy', async () => {
        const engine = context.engine();
        const target = subject.target(engine);
        expect(existsSync(target.file)).toBe(false);
        await engine.prepare(target, true);
        expect(existsSync(target.file)).toBe(true);
        const handle = await engine.open(target);
        expect(await handle.sizeBytes!()).toBeGreaterThan(0);
        await handle.close();
        await engine.destroy(target);
        for (const suffix of ['', '-wal', '-shm']) expect(existsSync(target.file + suffix), suffix).toBe(false);
      });
    }

    if (placement.kind === 'sandbox') {
      it('makes its file in the sandbox at prepare and leaves it there at destroy; no size on the host', async () => {
        const engine = context.engine();
        const target = subject.target(engine);
        const path = target.config.path as string;
        await engine.prepare(target, true);
        expect(await placement.fileExists(path)).toBe(true);
        const handle = await engine.open(target);
        expect(handle.sizeBytes).toBeUndefined();
        await handle.close();
        await engine.destroy(target);
        expect(await placement.fileExists(path)).toBe(true);
      });
    }

    if (placement.kind === 'server') {
      const { host, port } = placement.closed;
      it('answers STORE_UNAVAILABLE naming kind, store, host and port (never the password) when nothing listens', async () => {
        const engine = context.engine();
        const target = { ...subject.target(engine), config: engine.checkConfig({ host, port }), password: PASSWORD };
        const handle = await engine.open(target);
        const call = handle.query
          ? handle.query({ sql: 'SELECT 1', params: [], maxRows: 1, timeoutMs: 5000 })
          : handle.command!({ command: ['PING'], timeoutMs: 5000 });
        const err = await refusal(call);
        expect(err.code).toBe('STORE_UNAVAILABLE');
        expect(err.message).toBe(`${engine.kind} store '${target.name}' at ${host}:${port}: ECONNREFUSED`);
        expect(visible(err)).not.toContain(PASSWORD);
        await handle.close();
        await handle.close();
      });

      it('checks the connection at prepare only when asked to, and destroys nothing on the server', async () => {
        const engine = context.engine();
        const target = { ...subject.target(engine), config: engine.checkConfig({ host, port }), password: PASSWORD };
        const err = await refusal(engine.prepare(target, true));
        expect(visible(err)).not.toContain(PASSWORD);
        expect(err.code).toBe('BAD_REQUEST');
        expect(err.message).toBe(`config: cannot connect to ${engine.kind} at ${host}:${port}: ECONNREFUSED (create with validate: false to skip this check)`);
        await engine.prepare(target, false);
        await engine.destroy(target);
      });

      it('needs a host unless the store is bound to a sandbox, whose address is then the default', async () => {
        const engine = context.engine();
        const bare = { ...subject.target(engine), config: engine.checkConfig({}) };
        const err = await refusal(engine.open(bare));
        expect(err).toMatchObject({ code: 'BAD_REQUEST', message: `config.host: required for a ${engine.kind} store that is not bound to a sandbox` });
        const bound = subject.target(engine);
        const { host: configured, ...rest } = bound.config;
        await engine.prepare({ ...bound, config: rest, defaultHost: configured as string }, true);
      });

      it("leaves the store's data on its server at destroy (it belongs to the server)", async () => {
        const engine = context.engine();
        const target = subject.target(engine);
        await engine.prepare(target, true);
        const before = await engine.open(target);
        const kept = await keepSomething(subject, before);
        await before.close();
        await engine.destroy(target);
        const after = await engine.open(target);
        try {
          expect(await kept.readBack(after)).toBe(true);
        } finally {
          await kept.remove(after);
          await after.close();
        }
      });

      it("never takes the service's password field", async () => {
        const engine = context.engine();
        const err = await refusal(Promise.resolve().then(() => engine.checkConfig({ host, password: 'secret' })));
        expect(err.message).toBe(`config.password: unknown field for a ${engine.kind} store`);
      });
    }
  });
}

/** Writes something into a store through `handle`: a table with a row, or a key. */
async function keepSomething(subject: StoreEngineSubject, handle: StoreHandle) {
  const name = uniqueName('kept');
  if (subject.sql) {
    const execute = (sql: string) => handle.execute!({ statements: [{ sql, params: [] }], transaction: true, maxRows: 10, timeoutMs: 10_000 });
    await execute(subject.sql.createTable(name));
    await execute(`INSERT INTO ${name} (name) VALUES ('kept')`);
    return {
      readBack: async (other: StoreHandle) =>
        JSON.stringify((await other.query!({ sql: `SELECT name FROM ${name}`, params: [], maxRows: 10, timeoutMs: 10_000 })).rows) === '[["kept"]]',
      remove: async (other: StoreHandle) => {
        await other.execute!({ statements: [{ sql: `DROP TABLE ${name}`, params: [] }], transaction: true, maxRows: 10, timeoutMs: 10_000 });
      },
    };
  }
  const trip = subject.commands!.roundTrip(name, 'kept');
  await handle.command!({ command: trip.put, timeoutMs: 10_000 });
  return {
    readBack: async (other: StoreHandle) => trip.value(await other.command!({ command: trip.get, timeoutMs: 10_000 })) === 'kept',
    remove: async () => undefined,
  };
}
