import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { detachedCommand } from '../../../src/schemas/detached-schemas.js';
import { execResult } from '../../../src/schemas/exec-schemas.js';
import { view } from '../../../src/schemas/view.js';

describe('view (the wire form of a record)', () => {
  const schema = z.object({ b: z.string(), a: z.int().nullable(), c: z.string().optional(), d: z.string().optional() });

  it("keeps the schema's fields in its order and leaves out other fields", () => {
    const body = view(schema, { a: 1, extra: 'secret', c: 'x', b: 'y' } as never);
    expect(JSON.stringify(body)).toBe('{"b":"y","a":1,"c":"x"}');
  });

  it('leaves out an optional field that is null or undefined, and keeps a required null', () => {
    expect(view(schema, { b: 'y', a: null, c: null, d: undefined })).toEqual({ b: 'y', a: null });
    expect(Object.keys(view(schema, { b: 'y', a: null, c: '' }))).toEqual(['b', 'a', 'c']);
  });

  it('makes the exec result and detached views from the backend spelling as they are', () => {
    const result = { exit_code: 3, stdout: 'o', stderr: 'e', output: 'oe', timed_out: false, truncated: false, duration_ms: 5 };
    expect(JSON.stringify(view(execResult, result))).toBe(
      '{"output":"oe","exit_code":3,"stdout":"o","stderr":"e","duration_ms":5,"timed_out":false,"truncated":false}',
    );
    const record = { id: 'd1', sandbox_uuid: 'u', process_id: 'p', pid: 9, command: ['sleep', '1'], started_at: 't' };
    expect(view(detachedCommand, { ...record, sandbox: 's', status: 'failed', exit_code: null, finished_at: 'f' })).toEqual({
      id: 'd1',
      sandbox: 's',
      command: ['sleep', '1'],
      pid: 9,
      status: 'failed',
      exit_code: null,
      started_at: 't',
      finished_at: 'f',
    });
  });
});
