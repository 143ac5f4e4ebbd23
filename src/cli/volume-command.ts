import { Command } from 'commander';
import { apiPath } from '../client/api-client.js';
import { volume as volumeSchema, type Volume } from '../schemas/volume-schemas.js';
import { action, type ClientContext } from './client/client-context.js';
import { printRecord, type FieldLayout } from './client/fields.js';
import { age, printList } from './client/output.js';
import { removeCommand } from './client/remove-command.js';

/** `sandboxd volume create|list|get|rm`: named volumes, which sandboxes mount with `sandbox create --volume`. */
export function volumeCommand(ctx: ClientContext): Command {
  const volume = new Command('volume').alias('volumes').description('create, list, inspect and delete named volumes (storage that outlives sandboxes)');
  const api = () => ctx.connection().api;

  volume
    .command('create')
    .description('create a named volume; mount it with `sandbox create NAME --volume VOLUME:/path`')
    .argument('<name>', 'volume name')
    .action(action(async (name: string) => printVolume(await api().request<Volume>({ method: 'POST', path: '/volumes', body: { name } }), ctx.flags.json)));

  volume
    .command('list')
    .alias('ls')
    .description('list volumes: name, the sandboxes that mount each, age')
    .action(
      action(async () => {
        const list = await api().request<Volume[]>({ method: 'GET', path: '/volumes' });
        printList(list, ctx.flags.json, ['NAME', 'IN USE BY', 'AGE'], (v) => [v.name, v.in_use_by.join(',') || '-', age(v.created_at)]);
      }),
    );

  volume
    .command('get')
    .description('show a volume')
    .argument('<name>', 'volume name')
    .action(action(async (name: string) => printVolume(await api().request<Volume>({ method: 'GET', path: apiPath('volumes', name) }), ctx.flags.json)));

  removeCommand(volume, ctx, { description: 'delete volumes and their contents (refused while a sandbox mounts one)', names: 'volume names', route: (name) => apiPath('volumes', name) });
  return volume;
}

const VOLUME_LAYOUT: FieldLayout<Volume> = {
  show: {
    created_at: { as: 'created', text: (v) => `${v.created_at} (${age(v.created_at)} ago)` },
    in_use_by: { as: 'in use by', text: (v) => v.in_use_by.join(', ') || '-' },
  },
};

function printVolume(volume: Volume, json: boolean): void {
  printRecord(volumeSchema, volume, VOLUME_LAYOUT, json);
}
