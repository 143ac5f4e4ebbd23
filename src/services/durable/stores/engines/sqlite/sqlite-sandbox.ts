/**
 * A sqlite store whose file lives inside its bound sandbox (`config.path`): each request runs
 * the image's python3 with its standard sqlite3 module through an exec (every catalog image has
 * python3). /query opens the file with `mode=ro` and `PRAGMA query_only`; /execute normally.
 * What comes back was printed by a program inside the sandbox, which its user controls: it is
 * validated before anything of it is used (docs/decisions.md, "sqlite stores").
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { isServiceError, ServiceError } from '../../../../../errors.js';
import { PACKAGE_ROOT } from '../../../../../paths.js';
import { MAX_RESULT_BYTES, storeError, type WireParams, type WireStatement } from './sqlite-protocol.js';
import type { RowSet, StatementResult } from '../../store-engine.js';
import { textDeeperThan } from '../../../../../domain/json-depth.js';

/**
 * Runs a command in a sandbox and waits for it: the shape of `ExecService.exec(name, input)`,
 * which the server wires in. It throws a ServiceError for a sandbox that is missing or stopped.
 */
export type SandboxExec = (
  sandbox: string,
  input: { command: string[]; stdin: string; timeout_ms: number },
) => Promise<{ exit_code: number; stdout: string; stderr: string; timed_out: boolean }>;

/** The script, read once from the package. */
let script: string | undefined;
const scriptText = () => (script ??= readFileSync(join(PACKAGE_ROOT, 'src', 'services', 'durable', 'stores', 'engines', 'sqlite', 'sandbox-sqlite.py'), 'utf8'));

/**
 * The command: python3 in isolated mode (no environment, no user site) reads the script as the
 * first line of stdin and the request after it, which keeps the command (and the audit record
 * of each exec) one short line.
 */
const LOADER = ['python3', '-I', '-c', 'import json, sys; exec(json.loads(sys.stdin.readline()))'];

/** The exec outlives the script's own deadline by this much, so the script answers TIMEOUT itself. */
const EXEC_GRACE_MS = 2000;
const SHOWN_STDERR = 500;

export type SandboxRequest =
  | { op: 'query'; sql: string; params: WireParams; max_rows: number; timeout_ms: number }
  | { op: 'execute'; statements: WireStatement[]; transaction: boolean; max_rows: number; timeout_ms: number }
  | { op: 'open'; timeout_ms: number };

export interface SandboxFile {
  name: string;
  sandbox: string;
  path: string;
  maxBytes: number;
}

const cellSchema = z.union([z.null(), z.number(), z.string()]);
const rowSetSchema = z
  .strictObject({
    columns: z.array(z.string()),
    column_types: z.array(z.enum(['null', 'integer', 'real', 'text', 'blob'])),
    rows: z.array(z.array(cellSchema)),
    truncated: z.boolean(),
  })
  .refine((set) => set.column_types.length === set.columns.length && set.rows.every((row) => row.length === set.columns.length));
const statementSchema = z.strictObject({
  rows_affected: z.int().min(0),
  last_insert_id: z.union([z.int(), z.string().regex(/^-?\d{1,20}$/), z.null()]),
  result: rowSetSchema.optional(),
});
const answerSchema = z.discriminatedUnion('ok', [
  z.strictObject({ ok: z.literal(true), value: z.union([rowSetSchema, z.array(statementSchema), z.null()]) }),
  z.strictObject({
    ok: z.literal(false),
    error: z.strictObject({
      // Only what a statement can cause: a sandbox cannot make the server report its own faults.
      code: z.enum(['BAD_REQUEST', 'READ_ONLY', 'SQL_ERROR', 'PAYLOAD_TOO_LARGE', 'TIMEOUT']),
      message: z.string().max(4096),
      engine_code: z.string().regex(/^SQLITE_[A-Z_]{1,60}$/).optional(),
      statement: z.int().min(0).optional(),
    }),
  }),
]);

/** Runs one request in the sandbox; the answer's value, checked to be what `request.op` returns. */
export async function runInSandbox(exec: SandboxExec, file: SandboxFile, request: Extract<SandboxRequest, { op: 'query' }>): Promise<RowSet>;
export async function runInSandbox(exec: SandboxExec, file: SandboxFile, request: Extract<SandboxRequest, { op: 'execute' }>): Promise<StatementResult[]>;
export async function runInSandbox(exec: SandboxExec, file: SandboxFile, request: Extract<SandboxRequest, { op: 'open' }>): Promise<null>;
export async function runInSandbox(exec: SandboxExec, file: SandboxFile, request: SandboxRequest): Promise<RowSet | StatementResult[] | null> {
  const where = `sqlite store '${file.name}' in sandbox '${file.sandbox}'`;
  let result;
  try {
    result = await exec(file.sandbox, {
      command: LOADER,
      stdin: `${JSON.stringify(scriptText())}\n${JSON.stringify({ ...request, path: file.path, max_bytes: file.maxBytes })}`,
      timeout_ms: request.timeout_ms + EXEC_GRACE_MS,
    });
  } catch (err) {
    // A stopped or missing sandbox (409 / 404 with its next step), or the exec path failing.
    if (isServiceError(err)) throw new ServiceError(err.code, `${where}: ${err.message}`, { hint: err.hint, details: err.details });
    throw new ServiceError('STORE_UNAVAILABLE', `${where}: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (result.timed_out) throw new ServiceError('TIMEOUT', `${where}: the statement did not finish within ${request.timeout_ms} ms and was stopped`);
  if (result.exit_code === 127) throw new ServiceError('UNSUPPORTED', `${where}: the sandbox has no python3, which runs its sqlite stores`);
  const line = result.stdout.trimEnd().split('\n').pop() ?? '';
  const parsed = line.length <= MAX_RESULT_BYTES + 64 * 1024 ? answerSchema.safeParse(parseJson(line)) : undefined;
  if (!parsed?.success) {
    const stderr = result.stderr.trim().slice(-SHOWN_STDERR);
    throw new ServiceError('STORE_UNAVAILABLE', `${where}: python3 gave no store answer (exit code ${result.exit_code})${stderr ? `: ${stderr}` : ''}`);
  }
  const answer = parsed.data;
  if (!answer.ok) throw storeError(answer.error, file.name);
  const value = answer.value;
  const fits =
    request.op === 'query'
      ? value !== null && !Array.isArray(value)
      : request.op === 'execute'
        ? Array.isArray(value) && value.length === request.statements.length
        : value === null;
  if (!fits) throw new ServiceError('STORE_UNAVAILABLE', `${where}: python3 answered ${request.op} with the wrong shape`);
  return value;
}

/** The helper's answer; undefined (a malformed answer) when it is not JSON or nests past the limit. */
function parseJson(line: string): unknown {
  if (textDeeperThan(line)) return undefined;
  try {
    return JSON.parse(line);
  } catch {
    return undefined;
  }
}
