import { Command } from 'commander';
import { apiPath } from '../client/api-client.js';
import { sandboxDetail, sandboxStatusValue, type SandboxDetail, type SandboxSummary } from '../schemas/sandbox-schemas.js';
import { profile } from '../schemas/common.js';
import { collect } from './cli-config.js';
import { action, type ClientContext } from './client/client-context.js';
import { schemaFields, type FieldLayout } from './client/fields.js';
import { age, integer, labelText, pairs, printFields, printJson, printTable, UsageError, withProgress } from './client/output.js';

interface CreateOptions {
  image?: string;
  profile?: string;
  vcpus?: string;
  memory?: string;
  label?: string[];
  env?: string[];
  ttl?: string;
}

/** `sandboxd sandbox create|list|get|rm|start|stop|recover`: the sandboxes of the API, for people and scripts. */
export function sandboxCommand(ctx: ClientContext): Command {
  const sandbox = new Command('sandbox').description('create, list, inspect, start, stop and remove sandboxes');
  const api = () => ctx.connection().api;

  sandbox
    .command('create')
    .description('create and start a sandbox; prints it')
    .argument('<name>', 'sandbox name')
    .option('--image <image>', "container image (default: the server's)")
    .option('--profile <profile>', `security profile: ${profile.options.join(', ')}`)
    .option('--vcpus <n>', 'CPU cores')
    .option('--memory <mb>', 'memory limit in MiB')
    .option('--label <k=v>', 'a label; repeatable', collect)
    .option('--env <K=V>', 'an environment variable of every process; repeatable', collect)
    .option('--ttl <duration>', 'time to live, e.g. 1h')
    .action(
      action(async (name: string, opts: CreateOptions) => {
        const body = {
          name,
          ...(opts.image ? { image: opts.image } : {}),
          ...(opts.profile ? { profile: opts.profile } : {}),
          ...(opts.vcpus ? { vcpus: integer(opts.vcpus, '--vcpus') } : {}),
          ...(opts.memory ? { memory_mb: integer(opts.memory, '--memory') } : {}),
          ...(opts.label ? { labels: pairs(opts.label, '--label') } : {}),
          ...(opts.env ? { env: pairs(opts.env, '--env') } : {}),
          ...(opts.ttl ? { ttl: opts.ttl } : {}),
        };
        const created = await withProgress(`creating ${name}`, api().request<SandboxDetail>({ method: 'POST', path: '/sandboxes', body }));
        printSandbox(created, ctx.flags.json);
      }),
    );

  sandbox
    .command('list')
    .alias('ls')
    .description('list sandboxes: name, status, image, profile, age, labels')
    .option('--label <k=v>', 'only sandboxes with this label; repeatable, ANDed', collect)
    .option('--status <status>', 'only sandboxes in this status; repeatable, ORed', collect)
    .option('--internal', "the server's own sandboxes too (durable objects' obj-<hex>)")
    .action(
      action(async (opts: { label?: string[]; status?: string[]; internal?: boolean }) => {
        const statuses: readonly string[] = sandboxStatusValue.options;
        const bad = opts.status?.find((status) => !statuses.includes(status));
        if (bad !== undefined) throw new UsageError(`--status '${bad}': expected one of ${statuses.join(', ')}`);
        const labels = Object.entries(pairs(opts.label, '--label') ?? {}).map(([k, v]) => `${k}:${v}`);
        const query = { ...(labels.length ? { label: labels } : {}), ...(opts.status ? { status: opts.status } : {}), ...(opts.internal ? { internal: 'true' } : {}) };
        const list = await api().request<SandboxSummary[]>({ method: 'GET', path: '/sandboxes', query });
        if (ctx.flags.json) return printJson(list);
        printTable(
          ['NAME', 'STATUS', 'IMAGE', 'PROFILE', 'AGE', 'LABELS'],
          list.map((s) => [s.name, s.status, s.image, s.profile, age(s.created_at), labelText(s.labels)]),
        );
      }),
    );

  sandbox
    .command('get')
    .description('show a sandbox')
    .argument('<name>', 'sandbox name')
    .action(action(async (name: string) => printSandbox(await api().request<SandboxDetail>({ method: 'GET', path: apiPath('sandboxes', name) }), ctx.flags.json)));

  sandbox
    .command('rm')
    .alias('delete')
    .description('remove sandboxes and everything in them')
    .argument('<name...>', 'sandbox names')
    .action(
      action(async (names: string[]) => {
        // Every name is tried; the first failure is reported after the others were removed.
        let failure: unknown;
        for (const name of names) {
          try {
            await api().request({ method: 'DELETE', path: apiPath('sandboxes', name) });
            if (ctx.flags.json) printJson({ removed: name });
            else process.stdout.write(`${name}\n`);
          } catch (err) {
            failure ??= err;
          }
        }
        if (failure) throw failure;
      }),
    );

  for (const [verb, description, progress] of [
    ['start', 'start a stopped sandbox', 'starting'],
    ['stop', 'stop a sandbox, keeping its files', 'stopping'],
    ['recover', 'recover an archived sandbox (it is then stopped; start it after)', 'recovering'],
  ] as const) {
    sandbox
      .command(verb)
      .description(description)
      .argument('<name>', 'sandbox name')
      .action(
        action(async (name: string) => {
          const done = await withProgress(`${progress} ${name}`, api().request<SandboxDetail>({ method: 'POST', path: apiPath('sandboxes', name, verb) }));
          printSandbox(done, ctx.flags.json);
        }),
      );
  }
  return sandbox;
}

/** How a sandbox shows to people: these fields first, the rest of its schema after them. */
const SANDBOX_LAYOUT: FieldLayout<SandboxDetail> = {
  first: ['name', 'status', 'image', 'profile', 'vcpus', 'memory_mb', 'disk_mb', 'ip', 'labels', 'created_at', 'expires_at', 'restored_from', 'backend', 'uuid'],
  show: {
    status: { text: (s) => (s.status_reason ? `${s.status} (${s.status_reason})` : s.status) },
    status_reason: 'hidden',
    labels: { text: (s) => labelText(s.labels) },
    created_at: { as: 'created', text: (s) => `${s.created_at} (${age(s.created_at)} ago)` },
    expires_at: { as: 'expires' },
  },
};

function printSandbox(sandbox: SandboxDetail, json: boolean): void {
  if (json) return printJson(sandbox);
  printFields(schemaFields(sandboxDetail, sandbox, SANDBOX_LAYOUT));
}
