import { createHash } from 'node:crypto';
import { badRequest, conflict, notFound } from '../../../errors.js';
import {
  DEFAULT_OBJECT_TIMEOUT_MS,
  objectClassDetail,
  objectClassSummary,
  type DefineClassInput,
  type ObjectClassDetail,
  type ObjectClassSummary,
} from '../../../schemas/object-schemas.js';
import { view } from '../../../schemas/view.js';
import type { ObjectClassRecord, ObjectRepository, ObjectRuntime } from '../../../state/object-repository.js';
import type { RunsApi } from '../../commands/api.js';
import type { ServiceContext } from '../../context.js';
import { isoNow, type Clock } from '../../support/index.js';

/** The image of a runtime's objects when the class names none. */
export const RUNTIME_IMAGES: Record<ObjectRuntime, string> = { node: 'sandboxd/node:bookworm', python: 'sandboxd/python:bookworm' };
const DEFAULT_CLASS_MEMORY_MB = 256;
const DEFAULT_IDLE_TIMEOUT_SECONDS = 300;
/** Longest the syntax check of a source may take. */
const VALIDATE_TIMEOUT_MS = 60_000;

/** Python's syntax check: prints `line col message` of the first error and exits 3. */
const PYTHON_CHECK = [
  'import sys',
  'try:',
  "    compile(sys.stdin.read(), 'index.py', 'exec')",
  'except SyntaxError as e:',
  "    print(e.lineno or 0, e.offset or 0, type(e).__name__ + ': ' + str(e.msg))",
  '    sys.exit(3)',
].join('\n');

export interface DefinedClass {
  class: ObjectClassDetail;
  created: boolean;
}

/** Registered durable-object classes: versioned module sources and their sandboxes' settings. */
export class ObjectClasses {
  private readonly repo: ObjectRepository;
  private readonly runs: RunsApi;
  private readonly clock: Clock;
  private readonly maxStorageBytes: number;

  /** The storage limit of an object whose class sets none (or is not registered). */
  get defaultMaxStorageBytes(): number {
    return this.maxStorageBytes;
  }

  private readonly sandboxes: Pick<ServiceContext['sandboxes'], 'checkResources'>;

  constructor(ctx: Pick<ServiceContext, 'clock' | 'sandboxes'> & { repo: ObjectRepository; runs: RunsApi; maxStorageBytes: number }) {
    this.sandboxes = ctx.sandboxes;
    this.repo = ctx.repo;
    this.runs = ctx.runs;
    this.clock = ctx.clock;
    this.maxStorageBytes = ctx.maxStorageBytes;
  }

  /**
   * Registers a class or updates it: the version grows by one when the source or a setting
   * changes, and stays when nothing does. The source is checked for syntax first (not run).
   */
  async define(input: DefineClassInput): Promise<DefinedClass> {
    const source = input.handlers ? moduleOfHandlers(input.handlers) : input.source;
    if (source === undefined) throw badRequest('give exactly one of source and handlers');
    const settings = {
      runtime: input.runtime,
      image: input.image ?? RUNTIME_IMAGES[input.runtime],
      profile: input.profile ?? 'moderate',
      vcpus: input.vcpus ?? 1,
      memory_mb: input.memory_mb ?? DEFAULT_CLASS_MEMORY_MB,
      timeout_ms: input.timeout_ms ?? DEFAULT_OBJECT_TIMEOUT_MS,
      idle_timeout_seconds: input.idle_timeout_seconds ?? DEFAULT_IDLE_TIMEOUT_SECONDS,
      max_storage_bytes: input.max_storage_bytes ?? this.maxStorageBytes,
      setup: input.setup ?? null,
    } as const;
    // The class's sandboxes are made at its first call: a limit the host cannot give is refused now, not then.
    this.sandboxes.checkResources(settings.vcpus, settings.memory_mb);
    if (input.validate !== false) await this.checkSyntax(input.runtime, settings.image, settings.profile, source, input.handlers ? 'handlers' : 'source');
    const sha256 = createHash('sha256').update(source).digest('hex');
    const existing = await this.repo.getClass(input.name);
    const now = isoNow(this.clock);
    const unchanged = existing && existing.sha256 === sha256 && sameSettings(existing, settings) && sameHandlers(existing.handlers, input.handlers);
    const record: ObjectClassRecord = unchanged
      ? existing
      : {
          name: input.name,
          ...settings,
          source,
          handlers: input.handlers ?? null,
          methods: null,
          version: (existing?.version ?? 0) + 1,
          sha256,
          created_at: existing?.created_at ?? now,
          updated_at: now,
        };
    if (!unchanged) await this.repo.putClass(record);
    return { class: await this.detail(record), created: !existing };
  }

  async list(): Promise<ObjectClassSummary[]> {
    const counts = await this.repo.countByClass();
    return (await this.repo.listClasses()).map((record) => view(objectClassSummary, { ...record, object_count: counts.get(record.name) ?? 0 }));
  }

  async get(name: string): Promise<ObjectClassDetail> {
    return this.detail(await this.require(name));
  }

  /** The class's record; NOT_FOUND saying how to register it. */
  async require(name: string): Promise<ObjectClassRecord> {
    const record = await this.repo.getClass(name);
    if (!record) throw notFound(`class '${name}' is not registered`, { hint: { action: 'register_class', class: name } });
    return record;
  }

  /** Removes a class that no object uses; CONFLICT naming how many objects still do. */
  async delete(name: string): Promise<string> {
    await this.require(name);
    const count = (await this.repo.countByClass()).get(name) ?? 0;
    if (count > 0) throw conflict(`class '${name}' has ${count} object${count === 1 ? '' : 's'}: delete ${count === 1 ? 'it' : `its ${count} objects`} first`);
    await this.repo.deleteClass(name);
    return `object class '${name}' deleted`;
  }

  private async detail(record: ObjectClassRecord): Promise<ObjectClassDetail> {
    const count = (await this.repo.countByClass()).get(record.name) ?? 0;
    return view(objectClassDetail, { ...record, object_count: count });
  }

  /**
   * Parses the source without running it, in a fast-run sandbox of the class's image and
   * profile: 400 `<field>: SyntaxError: ... (line:column)` when it does not parse.
   */
  private async checkSyntax(runtime: ObjectRuntime, image: string, profile: DefineClassInput['profile'], source: string, field: string): Promise<void> {
    const command =
      runtime === 'node'
        ? ['sh', '-c', 'cat > /tmp/sandboxd-check.mjs && exec node --check /tmp/sandboxd-check.mjs']
        : ['python3', '-c', PYTHON_CHECK];
    const result = await this.runs.run({ command, image, ...(profile ? { profile } : {}), stdin: source, timeout_ms: VALIDATE_TIMEOUT_MS });
    if (result.exit_code === 0) return;
    const problem = runtime === 'node' ? nodeSyntaxError(result.stderr) : pythonSyntaxError(result.stdout);
    throw badRequest(`${field}: ${problem ?? `does not parse (exit code ${result.exit_code}): ${result.output.slice(-500).trim()}`}`);
  }
}

function sameSettings(record: ObjectClassRecord, settings: Omit<ObjectClassRecord, 'name' | 'source' | 'handlers' | 'methods' | 'version' | 'sha256' | 'created_at' | 'updated_at'>): boolean {
  return (Object.keys(settings) as (keyof typeof settings)[]).every((key) => JSON.stringify(record[key]) === JSON.stringify(settings[key]));
}

function sameHandlers(stored: Record<string, string> | null, given: Record<string, string> | undefined): boolean {
  return JSON.stringify(stored) === JSON.stringify(given ?? null);
}

/**
 * The ES module of a class registered in the handlers form: each handler `(input, state) =>`
 * becomes a method that gives it a copy of the whole storage and stores what it left there.
 */
export function moduleOfHandlers(handlers: Record<string, string>): string {
  const lines = ['const handlers = {'];
  for (const [name, body] of Object.entries(handlers)) lines.push(`  ${JSON.stringify(name)}: (\n${body}\n),`);
  lines.push('};');
  for (const name of Object.keys(handlers)) {
    lines.push(
      `export async function ${name}(args, ctx) {`,
      '  const state = ctx.storage.__snapshot();',
      `  const result = await handlers[${JSON.stringify(name)}](args, state);`,
      '  ctx.storage.__replace(state);',
      '  return result;',
      '}',
    );
  }
  return `${lines.join('\n')}\n`;
}

/** `SyntaxError: Unexpected token ';' (3:7)` from node --check's report. */
function nodeSyntaxError(stderr: string): string | undefined {
  const lines = stderr.split('\n');
  const message = lines.find((line) => /^[A-Za-z]*Error: /.test(line));
  if (!message) return undefined;
  const lineNumber = /:(\d+)$/.exec(lines[0] ?? '')?.[1];
  const caret = lines.findIndex((line) => /^\s*\^+\s*$/.test(line));
  const caretLine = caret > 0 ? lines[caret] : undefined;
  const column = caretLine !== undefined ? caretLine.indexOf('^') + 1 : undefined;
  return lineNumber ? `${message} (${lineNumber}${column ? `:${column}` : ''})` : message;
}

/** `SyntaxError: invalid syntax (3:7)` from the Python check's `line col message`. */
function pythonSyntaxError(stdout: string): string | undefined {
  const match = /^(\d+) (\d+) (.+)$/m.exec(stdout.trim());
  return match ? `${match[3]} (${match[1]}:${match[2]})` : undefined;
}
