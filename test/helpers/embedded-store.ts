import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import type { ErrorCode } from '../../src/errors.js';
import type { StoreEngine, StoreHandle, StoreKind, StoreTarget } from '../../src/services/durable/stores/store-engine.js';

/**
 * Stores of an embedded kind (kv, queue) in a temporary data directory: real SQLite files, laid
 * out as the service lays them out (`<dir>/stores/<id>.sqlite`).
 */
export class EmbeddedStores {
  readonly dir = mkdtempSync(join(tmpdir(), 'sandboxd-stores-'));

  constructor(
    private readonly engine: StoreEngine,
    private readonly kind: StoreKind,
  ) {}

  /** A new store's target, its config checked as the service checks it. */
  target(config: Record<string, unknown> = {}, name = 'store1'): StoreTarget {
    const id = randomUUID();
    return { id, name, kind: this.kind, config: this.engine.checkConfig(config), file: join(this.dir, 'stores', `${id}.sqlite`) };
  }

  /** Creates a store (prepare) and opens a handle on it. */
  async create(config: Record<string, unknown> = {}, name?: string): Promise<{ target: StoreTarget; handle: StoreHandle }> {
    const target = this.target(config, name);
    await this.engine.prepare(target, true);
    return { target, handle: await this.engine.open(target) };
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Runs one command on a handle (as the service does, with a timeout). */
export function run(handle: StoreHandle, command: unknown[], timeoutMs = 10_000): Promise<unknown> {
  if (!handle.command) throw new Error('the handle answers no commands');
  return handle.command({ command, timeoutMs });
}

/** Expects the promise to fail with a ServiceError of `code` whose message contains every part. */
export async function expectFailure(promise: Promise<unknown>, code: ErrorCode, ...parts: string[]): Promise<void> {
  const err = (await promise.then(
    () => {
      throw new Error(`expected ${code}, but the command succeeded`);
    },
    (e: unknown) => e,
  )) as { code?: string; message: string };
  expect(err.code, err.message).toBe(code);
  for (const part of parts) expect(err.message).toContain(part);
}
