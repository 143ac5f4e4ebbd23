import { z } from 'zod';
import { resourceName } from '../../schemas/common.js';
import { apiPath } from '../../client/api-client.js';
import { defineTool, json, requiring, text, type Tool } from '../tool.js';
import { sandboxName } from './arguments.js';

const snapshotName = resourceName.meta({ description: 'Name of the snapshot (lowercase letters, digits, _ . -; at most 63)' });

/** Snapshots: keep a sandbox's whole filesystem and settings, and make new sandboxes from it. */
export const snapshotTools: Tool[] = requiring('snapshots', [
  defineTool({
    name: 'snapshot_take',
    title: 'Snapshot a sandbox',
    description:
      'Save a sandbox\'s whole filesystem (including /workspace) and settings (image, vcpus, memory_mb, profile) as a ' +
      'named snapshot, while it keeps running. Use it before a risky change, or to fork work: snapshot_restore makes ' +
      'new sandboxes from it. Returns the snapshot as JSON (name, sandbox, image_tag, base_image, vcpus, memory_mb, created_at). ' +
      'Fails if the name is taken.',
    inputSchema: z.strictObject({
      sandbox: sandboxName.meta({ description: 'Name of the sandbox to snapshot' }),
      name: snapshotName,
    }),
    annotations: { destructiveHint: false, openWorldHint: false },
    handle: async (args, { api, signal }) => json(await api.request({ method: 'POST', path: '/snapshots', body: args }, signal)),
  }),

  defineTool({
    name: 'snapshot_restore',
    title: 'Restore a snapshot',
    description:
      'Make a new, running sandbox with the files and settings of a snapshot. The original sandbox is not touched. ' +
      'Returns the new sandbox as JSON; use it with sandbox_exec and the sandbox_file_* tools.',
    inputSchema: z.strictObject({
      name: snapshotName,
      as_name: resourceName.optional().meta({ description: 'Name of the new sandbox; default "<source sandbox>-restored"' }),
    }),
    annotations: { destructiveHint: false, openWorldHint: false },
    handle: async ({ name, as_name }, { api, signal }) =>
      json(await api.request({ method: 'POST', path: apiPath('snapshots', name, 'restore'), body: as_name ? { as_name } : {} }, signal)),
  }),

  defineTool({
    name: 'snapshot_list',
    title: 'List snapshots',
    description: 'List every snapshot as a JSON array of {name, sandbox, image_tag, base_image, vcpus, memory_mb, profile, created_at}.',
    inputSchema: z.strictObject({}),
    annotations: { readOnlyHint: true, openWorldHint: false },
    handle: async (_args, { api, signal }) => json(await api.request({ method: 'GET', path: '/snapshots' }, signal)),
  }),

  defineTool({
    name: 'snapshot_get',
    title: 'Inspect a snapshot',
    description: 'Show one snapshot as JSON: its source sandbox, image tag, base image, settings and creation time.',
    inputSchema: z.strictObject({ name: snapshotName }),
    annotations: { readOnlyHint: true, openWorldHint: false },
    handle: async ({ name }, { api, signal }) => json(await api.request({ method: 'GET', path: apiPath('snapshots', name) }, signal)),
  }),

  defineTool({
    name: 'snapshot_delete',
    title: 'Delete a snapshot',
    description: 'Delete a snapshot and its image, for good. Sandboxes restored from it keep running. Returns a confirmation.',
    inputSchema: z.strictObject({ name: snapshotName }),
    annotations: { destructiveHint: true, openWorldHint: false },
    handle: async ({ name }, { api, signal }) =>
      text(await api.request<string>({ method: 'DELETE', path: apiPath('snapshots', name) }, signal)),
  }),
]);
