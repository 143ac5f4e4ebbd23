import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { StoreEngine, StoreKind, StoreTarget } from '../../src/services/durable/stores/store-engine.js';

/**
 * Targets of the kinds whose stores are files on the host (sqlite, kv, queue), in a temporary
 * data directory laid out as the service lays it out (`<dir>/stores/<id>.sqlite`).
 */
export function hostFiles(kind: StoreKind): { target(engine: StoreEngine, config?: Record<string, unknown>): StoreTarget; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), `sandboxd-${kind}-conformance-`));
  let count = 0;
  return {
    target(engine, config = {}) {
      const id = randomUUID();
      count += 1;
      return { id, name: `${kind}-${count}`, kind, config: engine.checkConfig(config), file: join(dir, 'stores', `${id}.sqlite`) };
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
