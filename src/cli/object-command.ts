import { extname } from 'node:path';
import { Command } from 'commander';
import { apiPath } from '../client/api-client.js';
import { profile } from '../schemas/common.js';
import {
  objectClassDetail,
  objectStatus,
  objectView,
  type CallLogEntry,
  type DefineClassInput,
  type ObjectClassDetail,
  type ObjectClassSummary,
  type ObjectView,
} from '../schemas/object-schemas.js';
import { action, type ClientContext } from './client/client-context.js';
import { printRecord, type FieldLayout } from './client/fields.js';
import { jsonInput, limitQuery, oneOf, textInput } from './client/inputs.js';
import { age, integer, printList, printValue, relative, removeEach, UsageError } from './client/output.js';
import { removeCommand } from './client/remove-command.js';

const RUNTIMES = ['node', 'python'] as const;
/** The runtime a class file's extension says. */
const RUNTIME_BY_EXTENSION: Record<string, (typeof RUNTIMES)[number]> = { '.js': 'node', '.mjs': 'node', '.py': 'python' };

interface ClassOptions {
  runtime?: string;
  image?: string;
  profile?: string;
  vcpus?: string;
  memory?: string;
  timeout?: string;
  idleTimeout?: string;
  maxStorage?: string;
  setup?: string;
  validate: boolean;
}

interface CallOptions {
  timeout?: string;
  idempotencyKey?: string;
  verbose?: boolean;
}

/** `sandboxd object ...`: durable object classes, objects and method calls. */
export function objectCommand(ctx: ClientContext): Command {
  const object = new Command('object').alias('objects').description('durable objects: register classes, call methods, list and remove objects');
  const api = () => ctx.connection().api;
  object.addCommand(classCommand(ctx));

  object
    .command('call')
    .description("call a method of an object (made and woken as needed); prints its return value (a string as it is, else JSON)")
    .argument('<class>', 'the class')
    .argument('<object_id>', 'the object, e.g. alice (made on its first call)')
    .argument('<method>', 'the method')
    .argument('[args]', "the method's arguments as JSON, @FILE or - (standard input); default {}")
    .option('--timeout <ms>', "give up after this many milliseconds (at most the class's timeout)")
    .option('--idempotency-key <key>', 'a repeat with the same key (within 24 h) runs nothing and answers the first result')
    .option('--verbose', "also print what the method printed (stderr); --json then prints {result, object_id, duration_ms, cold_start, logs}")
    .action(
      action(async (cls: string, id: string, method: string, args: string | undefined, opts: CallOptions) => {
        const body = args === undefined ? {} : await jsonInput(args, 'args');
        const query = { ...(opts.timeout ? { timeout_ms: String(integer(opts.timeout, '--timeout')) } : {}), ...(opts.verbose ? { verbose: 'true' } : {}) };
        const headers = opts.idempotencyKey ? { 'idempotency-key': opts.idempotencyKey } : undefined;
        const answer = await api().request<unknown>({ method: 'POST', path: apiPath('objects', cls, id, 'call', method), query, body, ...(headers ? { headers } : {}) });
        if (!opts.verbose || ctx.flags.json) return printValue(answer, ctx.flags.json);
        const { result, logs } = answer as { result: unknown; logs: string };
        process.stderr.write(logs);
        printValue(result, false);
      }),
    );

  object
    .command('list')
    .alias('ls')
    .description('list objects: class, object id, status, calls, last call, sandbox')
    .option('--class <class>', 'only objects of this class')
    .option('--status <status>', `only objects in this status: ${objectStatus.options.join(', ')}`)
    .option('--limit <n>', 'at most this many (default 100)')
    .action(
      action(async (opts: { class?: string; status?: string; limit?: string }) => {
        const query = {
          ...(opts.class ? { class: opts.class } : {}),
          ...(opts.status ? { status: oneOf(opts.status, objectStatus.options, '--status') } : {}),
          ...limitQuery(opts.limit),
        };
        const list = await api().request<ObjectView[]>({ method: 'GET', path: '/objects', query });
        printList(list, ctx.flags.json, ['CLASS', 'OBJECT ID', 'STATUS', 'CALLS', 'LAST CALL', 'SANDBOX'], (o) => [o.class, o.object_id, o.status, String(o.call_count), relative(o.last_call_at), o.sandbox]);
      }),
    );

  object
    .command('get')
    .description('show an object: status, storage, alarm, calls')
    .argument('<class>', 'the class')
    .argument('<object_id>', 'the object')
    .action(action(async (cls: string, id: string) => printObject(await api().request<ObjectView>({ method: 'GET', path: apiPath('objects', cls, id) }), ctx.flags.json)));

  object
    .command('rm')
    .alias('delete')
    .description('delete an object: its storage, alarm, call log and managed sandbox')
    .argument('<class>', 'the class')
    .argument('<object_id...>', 'the objects')
    .action(
      action(async (cls: string, ids: string[]) =>
        removeEach(
          ids,
          async (id) => {
            const found = await api().request<ObjectView>({ method: 'GET', path: apiPath('objects', cls, id) });
            await api().request({ method: 'DELETE', path: apiPath('objects', found.id) });
          },
          ctx.flags.json,
        ),
      ),
    );

  object
    .command('calls')
    .description("an object's latest calls, newest first: when, method, source, outcome, duration")
    .argument('<class>', 'the class')
    .argument('<object_id>', 'the object')
    .option('--limit <n>', 'at most this many (default 50, at most 100)')
    .action(
      action(async (cls: string, id: string, opts: { limit?: string }) => {
        const query = limitQuery(opts.limit);
        const calls = await api().request<CallLogEntry[]>({ method: 'GET', path: apiPath('objects', cls, id, 'calls'), query });
        printList(calls, ctx.flags.json, ['STARTED', 'METHOD', 'SOURCE', 'OUTCOME', 'DURATION', 'ERROR'], (c) => [c.started_at, c.method, c.source, c.outcome, `${c.duration_ms}ms`, c.error ?? '']);
      }),
    );
  return object;
}

/** `sandboxd object class create|list|get|rm`. */
function classCommand(ctx: ClientContext): Command {
  const cls = new Command('class').alias('classes').description('register, list, show and delete object classes');
  const api = () => ctx.connection().api;

  cls
    .command('create')
    .description('register a class from a module file (or update it: its version grows when something changed); prints it')
    .argument('<name>', 'class name')
    .argument('<file>', 'the module: a .js/.mjs ES module whose exported functions (args, ctx) are the methods, or a .py module of such functions; - reads standard input')
    .option('--runtime <runtime>', `${RUNTIMES.join(' or ')} (default: from the file's extension)`)
    .option('--image <image>', "image of the objects' sandboxes (default by runtime)")
    .option('--profile <profile>', `security profile of the objects' sandboxes: ${profile.options.join(', ')}`)
    .option('--vcpus <n>', 'CPU cores of each sandbox')
    .option('--memory <mb>', 'memory of each sandbox in MiB')
    .option('--timeout <ms>', 'longest a method call may run')
    .option('--idle-timeout <seconds>', 'seconds without a call after which an object hibernates')
    .option('--max-storage <bytes>', "largest storage of one object (as JSON)")
    .option('--setup <command>', 'a command run once per sandbox and class version, split at spaces, e.g. "npm install lodash"')
    .option('--no-validate', 'do not check that the source parses before registering it')
    .action(
      action(async (name: string, file: string, opts: ClassOptions) => {
        const runtime = opts.runtime ? oneOf(opts.runtime, RUNTIMES, '--runtime') : RUNTIME_BY_EXTENSION[extname(file)];
        if (!runtime) throw new UsageError(`${file}: say the class's runtime with --runtime ${RUNTIMES.join('|')} (the file's extension does not)`);
        const body: DefineClassInput = {
          name,
          runtime,
          source: await textInput(file === '-' ? '-' : `@${file}`),
          ...(opts.image ? { image: opts.image } : {}),
          ...(opts.profile ? { profile: oneOf(opts.profile, profile.options, '--profile') } : {}),
          ...(opts.vcpus ? { vcpus: integer(opts.vcpus, '--vcpus') } : {}),
          ...(opts.memory ? { memory_mb: integer(opts.memory, '--memory') } : {}),
          ...(opts.timeout ? { timeout_ms: integer(opts.timeout, '--timeout') } : {}),
          ...(opts.idleTimeout ? { idle_timeout_seconds: integer(opts.idleTimeout, '--idle-timeout') } : {}),
          ...(opts.maxStorage ? { max_storage_bytes: integer(opts.maxStorage, '--max-storage') } : {}),
          ...(opts.setup ? { setup: opts.setup.split(/\s+/).filter(Boolean) } : {}),
          ...(opts.validate ? {} : { validate: false }),
        };
        printClass(await api().request<ObjectClassDetail>({ method: 'POST', path: '/objects/classes', body }), ctx.flags.json);
      }),
    );

  cls
    .command('list')
    .alias('ls')
    .description('list classes: name, runtime, version, methods, objects, when updated')
    .action(
      action(async () => {
        const list = await api().request<ObjectClassSummary[]>({ method: 'GET', path: '/objects/classes' });
        printList(list, ctx.flags.json, ['NAME', 'RUNTIME', 'VERSION', 'METHODS', 'OBJECTS', 'UPDATED'], (c) => [c.name, c.runtime, String(c.version), c.methods?.join(',') ?? '-', String(c.object_count), `${age(c.updated_at)} ago`]);
      }),
    );

  cls
    .command('get')
    .description('show a class (--source: print its source only)')
    .argument('<name>', 'class name')
    .option('--source', 'print the source and nothing else')
    .action(
      action(async (name: string, opts: { source?: boolean }) => {
        const found = await api().request<ObjectClassDetail>({ method: 'GET', path: apiPath('objects', 'classes', name) });
        if (opts.source && !ctx.flags.json) return printValue(found.source, false);
        printClass(found, ctx.flags.json);
      }),
    );

  removeCommand(cls, ctx, { description: 'delete classes (refused while a class has objects)', names: 'class names', route: (name) => apiPath('objects', 'classes', name) });
  return cls;
}

const CLASS_LAYOUT: FieldLayout<ObjectClassDetail> = {
  first: ['name', 'runtime', 'version', 'methods', 'object_count', 'image', 'profile'],
  show: {
    methods: { text: (c) => c.methods?.join(', ') ?? '(known after the first call)' },
    object_count: { as: 'objects' },
    setup: { text: (c) => c.setup?.join(' ') },
    source: { text: (c) => `${c.source.trimEnd().split('\n').length} lines (class get --source prints it)` },
    created_at: { as: 'created' },
    updated_at: { as: 'updated' },
    handlers: { text: (c) => (c.handlers ? Object.keys(c.handlers).join(', ') : undefined) },
  },
};

function printClass(found: ObjectClassDetail, json: boolean): void {
  printRecord(objectClassDetail, found, CLASS_LAYOUT, json);
}

const OBJECT_LAYOUT: FieldLayout<ObjectView> = {
  first: ['class', 'object_id', 'status', 'sandbox', 'call_count', 'last_call_at', 'storage', 'storage_bytes', 'alarm'],
  show: {
    call_count: { as: 'calls' },
    last_call_at: { as: 'last call', text: (o) => (o.last_call_at ? `${o.last_call_at} (${relative(o.last_call_at)})` : '-') },
    alarm: { text: (o) => (o.alarm ? `${o.alarm.method} at ${o.alarm.fire_at}` : '-') },
  },
};

function printObject(found: ObjectView, json: boolean): void {
  printRecord(objectView, found, OBJECT_LAYOUT, json);
}
