import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { RowCodec } from '../../../src/state/row-codec.js';
import { SandboxRepository, type SandboxRecord } from '../../../src/state/sandbox-repository.js';
import { openStore, type Store } from '../../../src/state/store.js';

interface Row {
  id: string;
  tags: string;
  policy: string | null;
}
interface Rec {
  id: string;
  tags: string[];
  policy: { max: number } | null;
}

describe('RowCodec', () => {
  const codec = new RowCodec<Row, Rec>(['tags', 'policy']);

  it('parses and stringifies the JSON columns only; a null column stays null', () => {
    const record: Rec = { id: 'a', tags: ['x'], policy: null };
    expect(codec.toRow(record)).toEqual({ id: 'a', tags: '["x"]', policy: null });
    expect(codec.fromRow({ id: 'a', tags: '["x"]', policy: '{"max":2}' })).toEqual({ id: 'a', tags: ['x'], policy: { max: 2 } });
    expect(codec.fromRow(codec.toRow(record))).toEqual(record);
  });

  it('leaves undefined fields out of the columns of a partial record', () => {
    expect(codec.toColumns({ tags: undefined, policy: { max: 1 } })).toEqual({ policy: '{"max":1}' });
  });
});

describe('SandboxRepository', () => {
  let store: Store | undefined;
  let dir: string | undefined;
  afterEach(async () => {
    await store?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('stores a record under its own field names and updates only real columns', async () => {
    dir = mkdtempSync(join(tmpdir(), 'sandboxd-codec-'));
    store = await openStore(dir);
    const repo = new SandboxRepository(store.db, store.sql);
    const record: SandboxRecord = {
      uuid: 'u1', name: 'a', status: 'running', backend: 'fake', backend_id: 'c1', image: 'i', vcpus: 1, memory_mb: 256, disk_mb: null,
      profile: 'moderate', labels: { k: 'v' }, description: null, lifecycle: { auto_stop_after_seconds: 5 }, env: { A: '1' },
      source_url: null, source_ref: null, created_at: 't0', updated_at: 't0', last_activity_at: null, expires_at: null,
      archived_at: null, archived_reason: null, status_reason: null, root_image: null, restored_from: null, secret_mappings: null, network: null, volumes: null, internal: 0,
    };
    expect(await repo.insert(record)).toBe(true);
    expect(await repo.byName('a')).toEqual(record);
    const row = await store.sql.first('select labels, lifecycle, env, memory_mb from sandboxes where uuid = ?', ['u1']);
    expect(row).toEqual({ labels: '{"k":"v"}', lifecycle: '{"auto_stop_after_seconds":5}', env: '{"A":"1"}', memory_mb: 256 });

    expect(await repo.update('u1', { lifecycle: null, last_activity_at: 't1' }, ['running'])).toBe(true);
    expect(await repo.byUuid('u1')).toEqual({ ...record, lifecycle: null, last_activity_at: 't1' });
    await expect(repo.update('u1', { bogus: 1 } as never)).rejects.toThrow("unknown column 'bogus'");
  });
});
