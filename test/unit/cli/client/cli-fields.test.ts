import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { schemaFields } from '../../../../src/cli/client/fields.js';
import { sandboxDetail, type SandboxDetail } from '../../../../src/schemas/sandbox-schemas.js';

const SANDBOX: SandboxDetail = {
  name: 'demo',
  uuid: '5f0c3c1e-0000-4000-8000-000000000000',
  status: 'running',
  backend: 'fake',
  image: 'sandboxd/base:bookworm',
  labels: { team: 'ml' },
  profile: 'moderate',
  created_at: '2026-01-01T00:00:00.000Z',
  vcpus: 1,
  memory_mb: 512,
  network: { egress: 'open', allow: [], deny: [] },
};

describe('the fields the CLI shows (taken from the response schema)', () => {
  it('are every field of the schema: the leading ones in their order, then the rest in the schema order', () => {
    const fields = schemaFields(sandboxDetail, SANDBOX, { first: ['status', 'name'], show: { created_at: { as: 'created' }, status_reason: 'hidden' } });
    const keys = fields.map(([key]) => key);
    expect(keys.slice(0, 4)).toEqual(['status', 'name', 'uuid', 'backend']);
    expect(keys).toContain('created');
    expect(keys).not.toContain('status_reason');
    expect(keys).toHaveLength(Object.keys(sandboxDetail.shape).length - 1);
    expect(Object.fromEntries(fields)).toMatchObject({ name: 'demo', vcpus: 1, network: SANDBOX.network, created: SANDBOX.created_at });
  });

  it('show a field a schema gains without an edit of the CLI', () => {
    const grown = sandboxDetail.extend({ gpu_count: z.int().optional() });
    const fields = schemaFields(grown, { ...SANDBOX, gpu_count: 2 }, { first: ['name'] });
    expect(fields).toContainEqual(['gpu_count', 2]);
  });

  it('render a field as its layout says', () => {
    const fields = schemaFields(sandboxDetail, { ...SANDBOX, status_reason: 'removed outside' }, { show: { status: { text: (s) => `${s.status} (${s.status_reason})` } } });
    expect(fields).toContainEqual(['status', 'running (removed outside)']);
  });
});
