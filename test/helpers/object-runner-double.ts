import type { FakeBackend, FakeExecScript } from '../../src/backends/fake/fake-backend.js';
import type { ExecRequest } from '../../src/backends/types.js';

/** What a scripted method may do besides returning a value. */
export const HANG = Symbol('hang');
export const GARBAGE = Symbol('garbage');
export const EXIT = Symbol('exit');

/** A method's result as JSON text, put into the reply line as it is (what code that writes its own line to the runner's stdout sends). */
export class RawResult {
  constructor(readonly json: string) {}
}

export interface DoubleContext {
  storage: {
    get(key: string, fallback?: unknown): unknown;
    put(key: string, value: unknown): void;
    delete(key: string): boolean;
  };
  setAlarm(at: string, method?: string, args?: unknown): void;
  deleteAlarm(): void;
  log(text: string): void;
}

export type DoubleMethod = (args: any, ctx: DoubleContext) => unknown;

/** Method implementations per class name, standing in for the modules the runner would load. */
export type DoubleClasses = Record<string, Record<string, DoubleMethod>>;

interface RunnerLine {
  nonce: string;
  module: string;
  method: string;
  args: unknown;
  storage: Record<string, unknown>;
}

/**
 * Scripts a FakeBackend so that the runner's protocol (one JSON line in, one `<nonce> {...}`
 * line out), as a process per call (exec) and as a persistent worker (where the test declares
 * `workers`), is answered by TypeScript methods: unit tests of the object service over the
 * fake backend. Syntax checks of class sources pass unless the
 * source contains `SYNTAX ERROR`. Returns the runner calls seen, by method.
 */
export function scriptObjectRunner(backend: FakeBackend, classes: DoubleClasses): { calls: string[] } {
  const calls: string[] = [];
  for (const image of ['sandboxd/node:bookworm', 'sandboxd/python:bookworm']) backend.images.add(image);
  const previous = backend.onExec;
  backend.onExec = (request: ExecRequest, spec) => {
    const script = request.command.join(' ');
    if (script.includes('--check') || script.includes('compile(')) return syntaxCheck(request);
    if (!/runner-[0-9a-f]+\.(mjs|py)$/.test(request.command.at(-1) ?? '')) return previous(request, spec);
    const outcome = serve(JSON.parse(request.stdin!.toString('utf8')) as RunnerLine, classes, calls);
    if (outcome.hang) return { hang: true };
    if (outcome.exit_code !== undefined) return { chunks: [{ stream: 'stderr', text: outcome.stderr }], exit_code: outcome.exit_code };
    return {
      chunks: [...(outcome.stderr ? [{ stream: 'stderr' as const, text: outcome.stderr }] : []), { stream: 'stdout', text: `${outcome.line}\n` }],
      exit_code: 0,
    };
  };
  // The same methods behind the persistent workers, where the test declares the capability.
  backend.scriptWorker((_key, _request, call) => {
    const outcome = serve(JSON.parse(call.line) as RunnerLine, classes, calls);
    if (outcome.hang) return { hang: true };
    if (outcome.exit_code !== undefined) return { exit_code: outcome.exit_code, stderr: outcome.stderr };
    return { line: outcome.line, stderr: outcome.stderr };
  });
  return { calls };
}

/** What the runner does with one request: its stdout line and stderr, or a hang or an exit. */
interface Outcome {
  line: string;
  stderr: string;
  hang?: boolean;
  exit_code?: number;
}

function serve(line: RunnerLine, classes: DoubleClasses, calls: string[]): Outcome {
  const className = /objects\/([^/]+)\/v\d+\//.exec(line.module)![1]!;
  const methods = classes[className] ?? {};
  calls.push(line.method);
  if (line.method === '__describe') return answer(line.nonce, { ok: true, result: Object.keys(methods).sort(), writes: noWrites() });
  const method = methods[line.method];
  if (!method) return answer(line.nonce, { ok: false, kind: 'method_not_found', error: { name: 'Error', message: 'no method', stack: '' }, methods: Object.keys(methods) });
  const data = new Map(Object.entries(line.storage));
  const puts: Record<string, unknown> = {};
  const deletes: string[] = [];
  let alarm: unknown;
  let logs = '';
  const ctx: DoubleContext = {
    storage: {
      get: (key, fallback) => (data.has(key) ? structuredClone(data.get(key)) : fallback),
      put: (key, value) => {
        data.set(key, value);
        puts[key] = value;
      },
      delete: (key) => {
        deletes.push(key);
        return data.delete(key);
      },
    },
    setAlarm: (at, method = 'alarm', args = {}) => void (alarm = { at, method, args }),
    deleteAlarm: () => void (alarm = null),
    log: (text) => void (logs += `${text}\n`),
  };
  let result: unknown;
  try {
    result = method(line.args, ctx);
  } catch (err) {
    const error = err as Error;
    return answer(line.nonce, { ok: false, kind: 'threw', error: { name: error.name, message: error.message, stack: error.stack ?? '' } }, logs);
  }
  if (result === HANG) return { line: '', stderr: '', hang: true };
  if (result === GARBAGE) return { line: 'hello from a stray console.log', stderr: '' };
  if (result === EXIT) return { line: '', stderr: 'killed myself\n', exit_code: 1 };
  if (result instanceof RawResult) return { line: `${line.nonce} {"ok":true,"result":${result.json},"writes":${JSON.stringify(noWrites())}}`, stderr: logs };
  const reply = { ok: true, result: result ?? null, writes: { put: puts, delete: deletes, delete_all: false }, ...(alarm !== undefined ? { alarm } : {}) };
  return answer(line.nonce, reply, logs);
}

function noWrites() {
  return { put: {}, delete: [], delete_all: false };
}

function answer(nonce: string, reply: unknown, logs = ''): Outcome {
  return { line: `${nonce} ${JSON.stringify(reply)}`, stderr: logs };
}

function syntaxCheck(request: ExecRequest): FakeExecScript {
  const source = request.stdin?.toString('utf8') ?? '';
  if (!source.includes('SYNTAX ERROR')) return { exit_code: 0 };
  if (request.command[0] === 'python3') return { chunks: [{ stream: 'stdout', text: '3 7 SyntaxError: invalid syntax\n' }], exit_code: 3 };
  return {
    chunks: [{ stream: 'stderr', text: "/tmp/sandboxd-check.mjs:3\nfoo(SYNTAX ERROR;\n      ^\n\nSyntaxError: Unexpected identifier 'ERROR'\n" }],
    exit_code: 1,
  };
}
