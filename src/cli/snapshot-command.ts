import { Command } from 'commander';
import { apiPath } from '../client/api-client.js';
import type { SandboxDetail } from '../schemas/sandbox-schemas.js';
import { snapshot as snapshotSchema, type SnapshotView } from '../schemas/snapshot-schemas.js';
import { action, type ClientContext } from './client/client-context.js';
import { printRecord, type FieldLayout } from './client/fields.js';
import { age, printList, withProgress } from './client/output.js';
import { removeCommand } from './client/remove-command.js';
import { printSandbox } from './sandbox-command.js';

/** `sandboxd snapshot take|list|get|restore|rm`. */
export function snapshotCommand(ctx: ClientContext): Command {
  const snapshot = new Command('snapshot').description("take, list, restore and remove snapshots of a sandbox's filesystem and settings");
  const api = () => ctx.connection().api;

  snapshot
    .command('take')
    .description('snapshot a sandbox (it may keep running)')
    .argument('<sandbox>', 'the sandbox')
    .argument('<name>', 'the snapshot name')
    .action(
      action(async (sandbox: string, name: string) => {
        const taken = await withProgress(`snapshotting ${sandbox}`, api().request<SnapshotView>({ method: 'POST', path: '/snapshots', body: { sandbox, name } }));
        printSnapshot(taken, ctx.flags.json);
      }),
    );

  snapshot
    .command('list')
    .alias('ls')
    .description('list snapshots')
    .action(
      action(async () => {
        const list = await api().request<SnapshotView[]>({ method: 'GET', path: '/snapshots' });
        printList(list, ctx.flags.json, ['NAME', 'SANDBOX', 'IMAGE', 'PROFILE', 'AGE'], (s) => [s.name, s.sandbox, s.base_image, s.profile, age(s.created_at)]);
      }),
    );

  snapshot
    .command('get')
    .description('show a snapshot')
    .argument('<name>', 'the snapshot name')
    .action(action(async (name: string) => printSnapshot(await api().request<SnapshotView>({ method: 'GET', path: apiPath('snapshots', name) }), ctx.flags.json)));

  snapshot
    .command('restore')
    .description('restore a snapshot as a new running sandbox; prints it as `sandbox create` does')
    .argument('<name>', 'the snapshot name')
    .option('--as <sandbox>', 'name of the new sandbox (default <sandbox>-restored)')
    .action(
      action(async (name: string, opts: { as?: string }) => {
        const restored = await withProgress(
          `restoring ${name}`,
          api().request<SandboxDetail>({ method: 'POST', path: apiPath('snapshots', name, 'restore'), body: opts.as ? { as_name: opts.as } : {} }),
        );
        printSandbox(restored, ctx.flags.json);
      }),
    );

  removeCommand(snapshot, ctx, { description: 'delete snapshots and their images', names: 'snapshot names', route: (name) => apiPath('snapshots', name) });
  return snapshot;
}

/** How a snapshot shows to people: these fields first, the rest of its schema after them. */
const SNAPSHOT_LAYOUT: FieldLayout<SnapshotView> = {
  first: ['name', 'sandbox', 'base_image', 'profile', 'vcpus', 'memory_mb', 'created_at', 'image_tag'],
  show: { base_image: { as: 'image' }, created_at: { as: 'created' } },
};

function printSnapshot(snapshot: SnapshotView, json: boolean): void {
  printRecord(snapshotSchema, snapshot, SNAPSHOT_LAYOUT, json);
}
