/**
 * Helpers for the tests of the external store engines (postgres, mysql, redis), which run
 * against the real servers on 127.0.0.1 and create their own databases, users and key prefixes.
 */
import { randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import { ServiceError } from '../../src/errors.js';
import type { StoreEngine, StoreTarget } from '../../src/services/durable/stores/store-engine.js';

/** A random suffix for names this run creates on a shared server. */
export const runSuffix = () => randomBytes(5).toString('hex');

/** A password literal no server message would contain by chance. */
export const testPassword = () => `Pw-${randomBytes(8).toString('hex')}-secret`;

/** What the service hands an engine for a store with this (checked) config. */
export function storeTarget(
  engine: StoreEngine,
  name: string,
  config: Record<string, unknown>,
  extras: Partial<StoreTarget> = {},
): StoreTarget {
  return { id: `id-${name}`, name, kind: engine.kind, config: engine.checkConfig(config), file: '', ...extras };
}

/** The ServiceError a promise rejects with (fails the test when it resolves or throws something else). */
export async function failure(promise: Promise<unknown>): Promise<ServiceError> {
  const outcome = await promise.then(
    (value) => ({ value }),
    (err: unknown) => ({ err }),
  );
  if (!('err' in outcome)) throw new Error(`expected a failure, got ${JSON.stringify(outcome.value)}`);
  expect(outcome.err).toBeInstanceOf(ServiceError);
  return outcome.err as ServiceError;
}

/** The ServiceError a function throws synchronously. */
export function thrown(fn: () => unknown): ServiceError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ServiceError);
    return err as ServiceError;
  }
  throw new Error('expected a ServiceError, nothing was thrown');
}

/** Everything a client could see of an outcome: a result, or an error's code, message and details. */
export function visible(outcome: unknown): string {
  if (outcome instanceof ServiceError) return JSON.stringify({ code: outcome.code, message: outcome.message, details: outcome.details });
  return JSON.stringify(outcome);
}

/** Polls `check` until it holds (at most `seconds`), for effects the server applies a moment later. */
export async function eventually(check: () => Promise<boolean>, what: string, seconds = 10): Promise<void> {
  const deadline = Date.now() + seconds * 1000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: still not so after ${seconds} s`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * The PostgreSQL cluster that checks passwords (scripts/ensure-databases.sh): 127.0.0.1:5433,
 * scram-sha-256, with this superuser. The tests make their own roles on it.
 */
export const PG_AUTH = { host: '127.0.0.1', port: 5433, user: 'sandboxd_admin', password: 'sandboxd-admin' } as const;
