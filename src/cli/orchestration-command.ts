import { Command } from 'commander';
import { apiPath } from '../client/api-client.js';
import { definition, INSTANCE_STATUSES, instance, type OrchestrationDefinitionView, type OrchestrationInstance } from '../schemas/orchestration-schemas.js';
import { action, type ClientContext } from './client/client-context.js';
import { printRecord, type FieldLayout } from './client/fields.js';
import { jsonInput, jsonObject, limitQuery, oneOf } from './client/inputs.js';
import { age, printJson, printList, printTable } from './client/output.js';
import { removeCommand } from './client/remove-command.js';

interface StartOptions {
  input?: string;
  id?: string;
  startAt?: string;
  definition?: string;
}

/** `sandboxd orchestration ...`: definitions, and instances started, watched, signalled and terminated. */
export function orchestrationCommand(ctx: ClientContext): Command {
  const orchestration = new Command('orchestration')
    .alias('orchestrations')
    .description('durable workflows: save definitions, start instances, see their status, raise events, terminate');
  const api = () => ctx.connection().api;
  orchestration.addCommand(definitionCommand(ctx));

  orchestration
    .command('start')
    .description('start an instance of a definition; prints it (status pending, running, waiting or completed)')
    .argument('<name>', 'the definition')
    .option('--input <json>', "the instance's input as JSON (@FILE, - for standard input)")
    .option('--id <id>', 'the instance id (the same id and definition again answers the existing instance)')
    .option('--start-at <time>', 'stay pending until this RFC 3339 time')
    .option('--definition <file>', 'an inline definition (JSON file, - for standard input) used for this instance only')
    .action(
      action(async (name: string, opts: StartOptions) => {
        const body = {
          name,
          ...(opts.input !== undefined ? { input: await jsonInput(opts.input, '--input') } : {}),
          ...(opts.id ? { id: opts.id } : {}),
          ...(opts.startAt ? { start_at: opts.startAt } : {}),
          ...(opts.definition ? { definition: await jsonObject(fileArgument(opts.definition), '--definition') } : {}),
        };
        printInstance(await api().request<OrchestrationInstance>({ method: 'POST', path: '/orchestrations', body }), ctx.flags.json, false);
      }),
    );

  orchestration
    .command('status')
    .alias('get')
    .description("show an instance: status, output, error, and its steps (--history: its history too)")
    .argument('<id>', 'instance id')
    .option('--history', 'also print the history events')
    .action(
      action(async (id: string, opts: { history?: boolean }) => {
        const query = { history: opts.history || ctx.flags.json ? 'true' : 'false' };
        printInstance(await api().request<OrchestrationInstance>({ method: 'GET', path: apiPath('orchestrations', id), query }), ctx.flags.json, opts.history === true);
      }),
    );

  orchestration
    .command('list')
    .alias('ls')
    .description('list instances, newest first: id, definition, status, age, what they wait for')
    .option('--status <status>', `only instances in this status: ${INSTANCE_STATUSES.join(', ')}`)
    .option('--name <definition>', 'only instances of this definition')
    .option('--limit <n>', 'at most this many (default 100)')
    .action(
      action(async (opts: { status?: string; name?: string; limit?: string }) => {
        const query = {
          ...(opts.status ? { status: oneOf(opts.status, INSTANCE_STATUSES, '--status') } : {}),
          ...(opts.name ? { name: opts.name } : {}),
          ...limitQuery(opts.limit),
        };
        const list = await api().request<OrchestrationInstance[]>({ method: 'GET', path: '/orchestrations', query });
        printList(list, ctx.flags.json, ['ID', 'DEFINITION', 'STATUS', 'AGE', 'WAITING FOR'], (o) => [o.id, o.name, o.status, age(o.created_at), o.waiting_for.join(',') || '-']);
      }),
    );

  orchestration
    .command('raise')
    .alias('signal')
    .description('raise an event: a wait_for_event step of that name consumes it (buffered until then)')
    .argument('<id>', 'instance id')
    .argument('<event>', 'event name')
    .argument('[data]', 'what the step outputs, as JSON (@FILE, -)')
    .action(
      action(async (id: string, event: string, data: string | undefined) => {
        const body = { name: event, ...(data !== undefined ? { data: await jsonInput(data, 'data') } : {}) };
        const accepted = await api().request<{ event: string; sequence: number }>({ method: 'POST', path: apiPath('orchestrations', id, 'events'), body });
        if (ctx.flags.json) return printJson(accepted);
        process.stdout.write(`raised ${accepted.event} on ${id} (history sequence ${accepted.sequence})\n`);
      }),
    );

  orchestration
    .command('terminate')
    .description('terminate an instance: open work is cancelled, running activities aborted; prints it')
    .argument('<id>', 'instance id')
    .option('--reason <text>', 'why (kept as its error)')
    .action(
      action(async (id: string, opts: { reason?: string }) => {
        const body = opts.reason ? { reason: opts.reason } : {};
        printInstance(await api().request<OrchestrationInstance>({ method: 'POST', path: apiPath('orchestrations', id, 'terminate'), body }), ctx.flags.json, false);
      }),
    );

  removeCommand(orchestration, ctx, { description: 'delete finished instances and their history', names: 'instance ids', argument: 'id', route: (id) => apiPath('orchestrations', id) });
  return orchestration;
}

/** `sandboxd orchestration definition create|list|get|rm`. */
function definitionCommand(ctx: ClientContext): Command {
  const definitions = new Command('definition').alias('definitions').alias('def').description('save, list, show and delete orchestration definitions');
  const api = () => ctx.connection().api;

  definitions
    .command('create')
    .description('save a definition from a JSON file (the DSL: {name, steps, ...}); a changed one gets a new version; prints it')
    .argument('<file>', 'the definition as JSON; - reads standard input')
    .action(
      action(async (file: string) => {
        const body = await jsonObject(fileArgument(file), file);
        printRecord(definition, await api().request<OrchestrationDefinitionView>({ method: 'POST', path: '/orchestrations/definitions', body }), DEFINITION_LAYOUT, ctx.flags.json);
      }),
    );

  definitions
    .command('list')
    .alias('ls')
    .description('list definitions: name, version, steps, description')
    .action(
      action(async () => {
        const list = await api().request<OrchestrationDefinitionView[]>({ method: 'GET', path: '/orchestrations/definitions' });
        printList(list, ctx.flags.json, ['NAME', 'VERSION', 'STEPS', 'UPDATED', 'DESCRIPTION'], (d) => [d.name, String(d.version), stepIds(d), `${age(d.updated_at)} ago`, d.description ?? '']);
      }),
    );

  definitions
    .command('get')
    .description('show a definition')
    .argument('<name>', 'definition name')
    .action(
      action(async (name: string) =>
        printRecord(definition, await api().request<OrchestrationDefinitionView>({ method: 'GET', path: apiPath('orchestrations', 'definitions', name) }), DEFINITION_LAYOUT, ctx.flags.json),
      ),
    );

  removeCommand(definitions, ctx, { description: 'delete definitions (running instances keep their copy)', names: 'definition names', route: (name) => apiPath('orchestrations', 'definitions', name) });
  return definitions;
}

/** A file argument as `jsonInput` reads it: `-` is standard input, anything else a file. */
const fileArgument = (file: string) => (file === '-' ? '-' : `@${file}`);

const stepIds = (d: OrchestrationDefinitionView) => d.steps.map((step) => step.id).join(',');

const DEFINITION_LAYOUT: FieldLayout<OrchestrationDefinitionView> = {
  show: { steps: { text: (d) => d.steps.map((step) => `${step.id} (${step.type})`).join(', ') }, created_at: { as: 'created' }, updated_at: { as: 'updated' } },
};

const INSTANCE_LAYOUT: FieldLayout<OrchestrationInstance> = {
  first: ['id', 'name', 'status', 'waiting_for', 'input', 'output', 'error', 'failed_step'],
  show: {
    name: { as: 'definition', text: (o) => `${o.name} (version ${o.definition_version})` },
    definition_version: 'hidden',
    waiting_for: { as: 'waiting for', text: (o) => o.waiting_for.join(', ') || undefined },
    steps: 'hidden',
    steps_total: 'hidden',
    steps_next: 'hidden',
    history: 'hidden',
    history_next: 'hidden',
  },
};

/** An instance's fields, then its steps as a table (and its history with `history`). */
function printInstance(found: OrchestrationInstance, json: boolean, history: boolean): void {
  printRecord(instance, found, INSTANCE_LAYOUT, json);
  if (json) return;
  process.stdout.write('\n');
  printTable(
    ['STEP', 'TYPE', 'STATUS', 'ATTEMPTS', 'DETAIL'],
    found.steps.map((s) => [s.id, s.type, s.status, s.attempts === undefined ? '-' : String(s.attempts), s.error ?? (s.output !== undefined ? JSON.stringify(s.output) : s.event ? `waits for ${s.event}` : '')]),
  );
  if (found.steps_next !== null) process.stdout.write(`(${found.steps.length} of ${found.steps_total} steps: see --json or GET /orchestrations/${found.id}?steps_offset=${found.steps_next})\n`);
  if (!history) return;
  process.stdout.write('\n');
  printTable(['SEQ', 'TIME', 'TYPE', 'STEP'], (found.history ?? []).map((h) => [String(h.sequence), h.timestamp, h.type, h.step ?? '-']));
}
