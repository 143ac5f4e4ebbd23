import { Command } from 'commander';
import { apiPath } from '../client/api-client.js';
import { RUN_STATUSES, SCHEDULE_STATUSES, schedule as scheduleSchema, scheduleRun, type CreateScheduleInput, type ScheduleBody, type ScheduleRunBody } from '../schemas/schedule-schemas.js';
import { action, type ClientContext } from './client/client-context.js';
import { printRecord, type FieldLayout } from './client/fields.js';
import { jsonObject, limitQuery, oneOf } from './client/inputs.js';
import { printList, relative, UsageError } from './client/output.js';
import { removeCommand } from './client/remove-command.js';

interface CreateOptions {
  cron?: string;
  fireAt?: string;
  method?: string;
  args?: string;
  targetClass?: string;
  targetObjectId?: string;
  targetOrchestration?: string;
  targetSandbox?: string;
  timezone?: string;
  overlap?: string;
  misfire?: string;
  endAt?: string;
  paused?: boolean;
}

/** `sandboxd schedule ...`: cron and one-shot firings of object methods, orchestrations, sandbox commands and runs. */
export function scheduleCommand(ctx: ClientContext): Command {
  const schedule = new Command('schedule').alias('schedules').description('create, list, trigger, pause and delete schedules, and see their runs');
  const api = () => ctx.connection().api;

  schedule
    .command('create')
    .description(
      'create a schedule (--cron or --fire-at) of one target: a command in a sandbox (--target-sandbox NAME -- CMD...), a fresh run (-- CMD...), ' +
        'an object method (--target-class C --target-object-id ID --method M) or an orchestration (--target-orchestration NAME); prints it',
    )
    .usage('<name> (--cron EXPR | --fire-at TIME) [target options] [-- command...]')
    .argument('<name>', 'schedule name')
    .argument('[command...]', "after --: the command of an exec or run target (args.command)")
    .option('--cron <expr>', 'cron expression (5 fields, or 6 with seconds) or @hourly, @daily, ...')
    .option('--fire-at <time>', 'one firing at this RFC 3339 time, e.g. 2030-01-01T12:00:00Z')
    .option('--method <method>', 'exec (with --target-sandbox), run (no target), start (with --target-orchestration), or the object method')
    .option('--args <json>', "the target's arguments as a JSON object (@FILE, - for standard input): the method's args, the orchestration's input, an exec or /run body")
    .option('--target-sandbox <name>', 'run the command in this sandbox (method exec)')
    .option('--target-class <class>', 'call a method of an object of this class (with --target-object-id)')
    .option('--target-object-id <id>', 'the object whose method is called')
    .option('--target-orchestration <name>', 'start an instance of this orchestration definition (method start)')
    .option('--timezone <zone>', 'IANA time zone of the cron expression (default UTC)')
    .option('--overlap <mode>', 'skip (default) or allow a firing while the previous run still runs')
    .option('--misfire <mode>', 'after downtime: fire_once (default) or skip')
    .option('--end-at <time>', 'a cron schedule completes once no occurrence is left before this time')
    .option('--paused', 'create it paused')
    .action(
      action(async (name: string, command: string[], opts: CreateOptions) => {
        const created = await api().request<ScheduleBody>({ method: 'POST', path: '/schedules', body: await createBody(name, command, opts) });
        printSchedule(created, ctx.flags.json);
      }),
    );

  schedule
    .command('list')
    .alias('ls')
    .description('list schedules: name, status, when, target, next firing, last run, fired and triggered counts')
    .option('--status <status>', `only schedules in this status: ${SCHEDULE_STATUSES.join(', ')}`)
    .option('--limit <n>', 'at most this many (default 100)')
    .action(
      action(async (opts: { status?: string; limit?: string }) => {
        const query = {
          ...(opts.status ? { status: oneOf(opts.status, SCHEDULE_STATUSES, '--status') } : {}),
          ...limitQuery(opts.limit),
        };
        const list = await api().request<ScheduleBody[]>({ method: 'GET', path: '/schedules', query });
        printList(list, ctx.flags.json, ['NAME', 'STATUS', 'WHEN', 'TARGET', 'NEXT', 'LAST RUN', 'FIRED', 'TRIGGERED'], (s) => [s.name, s.status, when(s), target(s), relative(s.next_fire_at), s.last_run_status ?? '-', String(s.fire_count), String(s.trigger_count)]);
      }),
    );

  schedule
    .command('get')
    .description('show a schedule')
    .argument('<name>', 'schedule name or id')
    .action(action(async (name: string) => printSchedule(await api().request<ScheduleBody>({ method: 'GET', path: apiPath('schedules', name) }), ctx.flags.json)));

  for (const [verb, status, description] of [
    ['pause', 'paused', 'hold a schedule (it fires no more until resumed)'],
    ['resume', 'active', 'resume a paused schedule from now (paused time is not caught up)'],
  ] as const) {
    schedule
      .command(verb)
      .description(description)
      .argument('<name>', 'schedule name or id')
      .action(
        action(async (name: string) => printSchedule(await api().request<ScheduleBody>({ method: 'PATCH', path: apiPath('schedules', name), body: { status } }), ctx.flags.json)),
      );
  }

  schedule
    .command('trigger')
    .description('fire a schedule now and wait for its target; prints the run, and exits 1 when the run failed')
    .argument('<name>', 'schedule name or id')
    .action(
      action(async (name: string) => {
        const run = await api().request<ScheduleRunBody>({ method: 'POST', path: apiPath('schedules', name, 'trigger') });
        printRecord(scheduleRun, run, RUN_LAYOUT, ctx.flags.json);
        if (run.status === 'failed') process.exitCode = 1;
      }),
    );

  schedule
    .command('runs')
    .description("a schedule's runs, newest first: when, status, duration, error")
    .argument('<name>', 'schedule name or id')
    .option('--status <status>', `only runs in this status: ${RUN_STATUSES.join(', ')}`)
    .option('--limit <n>', 'at most this many (default 50, at most 100)')
    .action(
      action(async (name: string, opts: { status?: string; limit?: string }) => {
        const query = {
          ...(opts.status ? { status: oneOf(opts.status, RUN_STATUSES, '--status') } : {}),
          ...limitQuery(opts.limit),
        };
        const runs = await api().request<ScheduleRunBody[]>({ method: 'GET', path: apiPath('schedules', name, 'runs'), query });
        printList(runs, ctx.flags.json, ['STARTED', 'STATUS', 'DURATION', 'ERROR'], (r) => [r.started_at, r.status, r.duration_ms === null ? '-' : `${r.duration_ms}ms`, r.error ?? '']);
      }),
    );

  removeCommand(schedule, ctx, { description: 'delete schedules and their runs', names: 'schedule names or ids', route: (name) => apiPath('schedules', name) });
  return schedule;
}

/** The method a target implies when --method is not given. */
function methodOf(opts: CreateOptions): string {
  if (opts.method) return opts.method;
  if (opts.targetOrchestration) return 'start';
  if (opts.targetSandbox) return 'exec';
  if (opts.targetClass) throw new UsageError(`--target-class ${opts.targetClass}: say which method to call with --method`);
  return 'run';
}

async function createBody(name: string, command: string[], opts: CreateOptions): Promise<CreateScheduleInput> {
  if (!opts.cron && !opts.fireAt) throw new UsageError('schedule create: say when with --cron EXPR or --fire-at TIME');
  const method = methodOf(opts);
  if (command.length > 0 && method !== 'exec' && method !== 'run') throw new UsageError(`a command (after --) is for exec and run targets, not method ${method}`);
  const args = { ...(opts.args ? await jsonObject(opts.args, '--args') : {}), ...(command.length > 0 ? { command } : {}) };
  return {
    name,
    method,
    ...(opts.cron ? { cron: opts.cron } : {}),
    ...(opts.fireAt ? { fire_at: opts.fireAt } : {}),
    ...(Object.keys(args).length > 0 ? { args } : {}),
    ...(opts.targetSandbox ? { target_sandbox: opts.targetSandbox } : {}),
    ...(opts.targetClass ? { target_class: opts.targetClass } : {}),
    ...(opts.targetObjectId ? { target_object_id: opts.targetObjectId } : {}),
    ...(opts.targetOrchestration ? { target_orchestration: opts.targetOrchestration } : {}),
    ...(opts.timezone ? { timezone: opts.timezone } : {}),
    ...(opts.overlap ? { overlap: oneOf(opts.overlap, ['skip', 'allow'] as const, '--overlap') } : {}),
    ...(opts.misfire ? { misfire: oneOf(opts.misfire, ['fire_once', 'skip'] as const, '--misfire') } : {}),
    ...(opts.endAt ? { end_at: opts.endAt } : {}),
    ...(opts.paused ? { status: 'paused' as const } : {}),
  };
}

/** `*\/5 * * * * (UTC)` or `at 2030-01-01T00:00:00Z`. */
const when = (s: ScheduleBody) => (s.cron ? `${s.cron}${s.timezone === 'UTC' ? '' : ` (${s.timezone})`}` : s.fire_at ? `at ${s.fire_at}` : '-');

/** `exec in box`, `Counter/alice.increment`, `start build`, `run`. */
function target(s: ScheduleBody): string {
  if (s.target_sandbox) return `${s.method} in ${s.target_sandbox}`;
  if (s.target_class) return `${s.target_class}/${s.target_object_id ?? ''}.${s.method}`;
  if (s.target_orchestration) return `${s.method} ${s.target_orchestration}`;
  return s.method;
}

const SCHEDULE_LAYOUT: FieldLayout<ScheduleBody> = {
  first: ['name', 'status', 'cron', 'fire_at', 'timezone', 'method', 'target_sandbox', 'target_class', 'target_object_id', 'target_orchestration', 'args', 'next_fire_at', 'last_fired_at', 'last_run_status', 'fire_count', 'trigger_count'],
  show: {
    next_fire_at: { as: 'next', text: (s) => (s.next_fire_at ? `${s.next_fire_at} (${relative(s.next_fire_at)})` : '-') },
    last_fired_at: { as: 'last fired' },
    last_run_status: { as: 'last run' },
    fire_count: { as: 'fired' },
    trigger_count: { as: 'triggered' },
  },
};

function printSchedule(found: ScheduleBody, json: boolean): void {
  printRecord(scheduleSchema, found, SCHEDULE_LAYOUT, json);
}

const RUN_LAYOUT: FieldLayout<ScheduleRunBody> = { first: ['status', 'duration_ms', 'result', 'error', 'started_at', 'finished_at'] };
