import { describe, expect, it } from 'vitest';
import { conflict } from '../../../../../../../src/errors.js';
import { runInSandbox, type SandboxExec } from '../../../../../../../src/services/durable/stores/engines/sqlite/sqlite-sandbox.js';

/**
 * What python3 prints in a sandbox is written by a program its user controls: these answers
 * come from an exec double (the real script runs in test/integration/sqlite-sandbox-store.test.ts).
 */
const file = { name: 'app', sandbox: 'box', path: '/workspace/app.db', maxBytes: 1 << 20 };
const query = { op: 'query' as const, sql: 'SELECT 1', params: [], max_rows: 10, timeout_ms: 1000 };
const execute = { op: 'execute' as const, statements: [{ sql: 'SELECT 1', params: [], inserts: false }], transaction: true, max_rows: 10, timeout_ms: 1000 };
const answering =
  (stdout: string, extra: Partial<{ exit_code: number; stderr: string; timed_out: boolean }> = {}): SandboxExec =>
  async () => ({ exit_code: 0, stdout, stderr: '', timed_out: false, ...extra });
const rows = { columns: ['a'], column_types: ['integer'], rows: [[1]], truncated: false };

describe('answers from a sandbox', () => {
  it('takes a well-formed answer and sends the script and the request on stdin', async () => {
    let seen: { command: string[]; stdin: string; timeout_ms: number } | undefined;
    const exec: SandboxExec = async (_sandbox, input) => {
      seen = input;
      return { exit_code: 0, stdout: `noise\n${JSON.stringify({ ok: true, value: rows })}\n`, stderr: '', timed_out: false };
    };
    expect(await runInSandbox(exec, file, query)).toEqual(rows);
    expect(seen!.command).toEqual(['python3', '-I', '-c', 'import json, sys; exec(json.loads(sys.stdin.readline()))']);
    const [script, request] = seen!.stdin.split('\n');
    expect(JSON.parse(script!)).toMatch(/^# Runs one sqlite store request inside a sandbox/);
    expect(JSON.parse(request!)).toEqual({ ...query, path: '/workspace/app.db', max_bytes: 1 << 20 });
    expect(seen!.timeout_ms).toBeGreaterThan(1000);
  });

  it.each([
    ['not JSON', 'Traceback (most recent call last)'],
    ['nothing', ''],
    ['a value of the wrong kind', JSON.stringify({ ok: true, value: { columns: ['a'], column_types: ['integer'], rows: [[{ $where: 1 }]], truncated: false } })],
    ['rows longer than the columns', JSON.stringify({ ok: true, value: { ...rows, rows: [[1, 2]] } })],
    ['an unknown column type', JSON.stringify({ ok: true, value: { ...rows, column_types: ['jsonb'] } })],
    ['extra fields', JSON.stringify({ ok: true, value: rows, admin: true })],
    ['an error code the server keeps for itself', JSON.stringify({ ok: false, error: { code: 'INTERNAL', message: 'x' } })],
    ['a bad engine code', JSON.stringify({ ok: false, error: { code: 'SQL_ERROR', message: 'x', engine_code: 'rm -rf /' } })],
    ['a huge message', JSON.stringify({ ok: false, error: { code: 'SQL_ERROR', message: 'x'.repeat(5000) } })],
  ])('refuses %s', async (_what, stdout) => {
    await expect(runInSandbox(answering(stdout, { exit_code: 1, stderr: 'boom' }), file, query)).rejects.toMatchObject({
      code: 'STORE_UNAVAILABLE',
      message: "sqlite store 'app' in sandbox 'box': python3 gave no store answer (exit code 1): boom",
    });
  });

  it('refuses an answer of the wrong shape for the operation', async () => {
    await expect(runInSandbox(answering(JSON.stringify({ ok: true, value: rows })), file, execute)).rejects.toMatchObject({
      code: 'STORE_UNAVAILABLE',
      message: "sqlite store 'app' in sandbox 'box': python3 answered execute with the wrong shape",
    });
    await expect(runInSandbox(answering(JSON.stringify({ ok: true, value: [] })), file, execute)).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
    await expect(runInSandbox(answering(JSON.stringify({ ok: true, value: [] })), file, query)).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
  });

  it('passes the errors a statement can cause', async () => {
    const error = { code: 'SQL_ERROR', message: 'no such table: t', engine_code: 'SQLITE_ERROR' };
    await expect(runInSandbox(answering(JSON.stringify({ ok: false, error })), file, query)).rejects.toMatchObject({
      code: 'SQL_ERROR',
      message: 'no such table: t',
      details: { engine_code: 'SQLITE_ERROR' },
    });
  });

  it('answers a timed-out exec 504, a missing python3 422, and names the sandbox in what the exec throws', async () => {
    await expect(runInSandbox(answering('', { timed_out: true, exit_code: 124 }), file, query)).rejects.toMatchObject({
      code: 'TIMEOUT',
      message: "sqlite store 'app' in sandbox 'box': the statement did not finish within 1000 ms and was stopped",
    });
    await expect(runInSandbox(answering('', { exit_code: 127 }), file, query)).rejects.toMatchObject({ code: 'UNSUPPORTED', message: /has no python3/ });
    const stopped: SandboxExec = async () => {
      throw conflict("sandbox 'box' is stopped", { hint: { action: 'start', sandbox: 'box' } });
    };
    await expect(runInSandbox(stopped, file, query)).rejects.toMatchObject({
      code: 'CONFLICT',
      message: "sqlite store 'app' in sandbox 'box': sandbox 'box' is stopped",
      hint: { action: 'start', sandbox: 'box' },
    });
    const broken: SandboxExec = async () => {
      throw new Error('socket hang up');
    };
    await expect(runInSandbox(broken, file, query)).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE', message: "sqlite store 'app' in sandbox 'box': socket hang up" });
  });
});
