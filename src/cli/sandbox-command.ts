import { Command } from 'commander';
import { apiPath } from '../client/api-client.js';
import { sandboxDetail, sandboxStatusValue, type SandboxDetail, type SandboxSummary } from '../schemas/sandbox-schemas.js';
import { collect } from './cli-config.js';
import { action, type ClientContext } from './client/client-context.js';
import { printRecord, type FieldLayout } from './client/fields.js';
import { oneOf } from './client/inputs.js';
import { age, labelText, pairs, printList, withProgress } from './client/output.js';
import { removeCommand } from './client/remove-command.js';
import { createBody, createOptions, type CreateOptions } from './sandbox-create.js';

/** `sandboxd sandbox create|list|get|rm|start|stop|recover`: the sandboxes of the API, for people and scripts. */
export function sandboxCommand(ctx: ClientContext): Command {
  const sandbox = new Command('sandbox').description('create, list, inspect, start, stop and remove sandboxes');
  const api = () => ctx.connection().api;

  createOptions(
    sandbox
      .command('create')
      .description('create and start a sandbox; prints it')
      .argument('<name>', 'sandbox name'),
  ).action(
    action(async (name: string, opts: CreateOptions) => {
      const created = await withProgress(`creating ${name}`, api().request<SandboxDetail>({ method: 'POST', path: '/sandboxes', body: createBody(name, opts) }));
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
        for (const status of opts.status ?? []) oneOf(status, sandboxStatusValue.options, '--status');
        const labels = Object.entries(pairs(opts.label, '--label') ?? {}).map(([k, v]) => `${k}:${v}`);
        const query = { ...(labels.length ? { label: labels } : {}), ...(opts.status ? { status: opts.status } : {}), ...(opts.internal ? { internal: 'true' } : {}) };
        const list = await api().request<SandboxSummary[]>({ method: 'GET', path: '/sandboxes', query });
        printList(list, ctx.flags.json, ['NAME', 'STATUS', 'IMAGE', 'PROFILE', 'AGE', 'LABELS'], (s) => [s.name, s.status, s.image, s.profile, age(s.created_at), labelText(s.labels)]);
      }),
    );

  sandbox
    .command('get')
    .description('show a sandbox')
    .argument('<name>', 'sandbox name')
    .action(action(async (name: string) => printSandbox(await api().request<SandboxDetail>({ method: 'GET', path: apiPath('sandboxes', name) }), ctx.flags.json)));

  removeCommand(sandbox, ctx, { description: 'remove sandboxes and everything in them', names: 'sandbox names', route: (name) => apiPath('sandboxes', name) });

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
  first: ['name', 'status', 'image', 'profile', 'vcpus', 'memory_mb', 'disk_mb', 'ip', 'labels', 'description', 'created_at', 'expires_at', 'restored_from', 'backend', 'uuid'],
  show: {
    status: { text: (s) => (s.status_reason ? `${s.status} (${s.status_reason})` : s.status) },
    status_reason: 'hidden',
    labels: { text: (s) => labelText(s.labels) },
    created_at: { as: 'created', text: (s) => `${s.created_at} (${age(s.created_at)} ago)` },
    expires_at: { as: 'expires' },
    network: { text: ({ network: n }) => [n.egress, n.allow.length ? `allow=${n.allow.join(',')}` : '', n.deny.length ? `deny=${n.deny.join(',')}` : ''].filter(Boolean).join(' ') },
    volumes: { text: (s) => s.volumes?.map((v) => `${v.name}:${v.path}${v.read_only ? ':ro' : ''}`).join(', ') || undefined },
    secret_mappings: { as: 'secrets', text: (s) => Object.entries(s.secret_mappings ?? {}).map(([name, host]) => `${name}@${host}`).join(', ') || undefined },
  },
};

/** A sandbox as create, get, start, stop and a snapshot's restore print it. */
export function printSandbox(sandbox: SandboxDetail, json: boolean): void {
  printRecord(sandboxDetail, sandbox, SANDBOX_LAYOUT, json);
}
