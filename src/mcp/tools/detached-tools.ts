import { z } from 'zod';
import { execBody } from '../../schemas/exec-schemas.js';
import type { DetachedLogsBody } from '../../schemas/detached-schemas.js';
import { apiPath } from '../../client/api-client.js';
import { defineTool, json, requiring, text, type Tool } from '../tool.js';
import { sandboxName, shellCommand } from './arguments.js';

const detachedId = z.string().min(1).max(64).meta({ description: 'Id returned by sandbox_exec_detach (see sandbox_exec_list)' });

/**
 * The detached command's JSON, said once: sandbox_exec_status describes it, the other tools that
 * return it refer to that.
 */
const STATUS =
  'JSON {id, sandbox, command, pid, status, exit_code, started_at, finished_at}; status is running, completed (exit 0), ' +
  'failed (non-zero exit), killed (by sandbox_exec_kill) or lost (running when the sandbox stopped or restarted); ended ' +
  'commands keep status and logs across a stop and start of the sandbox.';
const SAME_STATUS = 'Returns its status JSON, as sandbox_exec_status does.';

/** Detached commands: servers, watchers and long builds that outlive one call. */
export const detachedTools: Tool[] = requiring('detached', [
  defineTool({
    name: 'sandbox_exec_detach',
    title: 'Start a background command in a sandbox',
    description:
      'Start a long-running command (a dev server, a watcher, a long build) in a running sandbox and return at once; it ' +
      'keeps running after this call and a server restart. Follow it with sandbox_exec_status, sandbox_exec_logs and ' +
      `sandbox_exec_kill by its id. ${SAME_STATUS}`,
    inputSchema: z.strictObject({ name: sandboxName, ...execBody.omit({ stdin: true, timeout_ms: true }).shape, command: shellCommand }),
    annotations: { destructiveHint: true, openWorldHint: true },
    handle: async ({ name, ...body }, { api, signal }) =>
      json(await api.request({ method: 'POST', path: apiPath('sandboxes', name, 'exec', 'detach'), body }, signal)),
  }),

  defineTool({
    name: 'sandbox_exec_status',
    title: 'Status of a background command',
    description: `Whether a command started by sandbox_exec_detach still runs, and its exit code once it ended. Returns ${STATUS}`,
    inputSchema: z.strictObject({ name: sandboxName, id: detachedId }),
    annotations: { readOnlyHint: true, openWorldHint: false },
    handle: async ({ name, id }, { api, signal }) =>
      json(await api.request({ method: 'GET', path: apiPath('sandboxes', name, 'exec', 'detached', id) }, signal)),
  }),

  defineTool({
    name: 'sandbox_exec_logs',
    title: 'Output of a background command',
    description:
      'The output a command started by sandbox_exec_detach printed so far on one stream (stdout by default), at most ' +
      'its last 4 MiB, shown as its first and last 8 KB.',
    inputSchema: z.strictObject({
      name: sandboxName,
      id: detachedId,
      stream: z.enum(['stdout', 'stderr']).optional().meta({ description: 'stdout (default) or stderr' }),
    }),
    annotations: { readOnlyHint: true, openWorldHint: false },
    handle: async ({ name, id, stream }, { api, signal }) => {
      const logs = await api.request<DetachedLogsBody>(
        { method: 'GET', path: apiPath('sandboxes', name, 'exec', 'detached', id, 'logs'), query: { stream: stream ?? 'stdout' } },
        signal,
      );
      return text(logs.content || `(no ${logs.stream} output)`);
    },
  }),

  defineTool({
    name: 'sandbox_exec_kill',
    title: 'Kill a background command',
    description: `Kill a command started by sandbox_exec_detach, with every process it started. ${SAME_STATUS}`,
    inputSchema: z.strictObject({ name: sandboxName, id: detachedId }),
    annotations: { destructiveHint: true, openWorldHint: false },
    handle: async ({ name, id }, { api, signal }) =>
      json(await api.request({ method: 'DELETE', path: apiPath('sandboxes', name, 'exec', 'detached', id) }, signal)),
  }),

  defineTool({
    name: 'sandbox_exec_list',
    title: 'List background commands',
    description: 'Every command started by sandbox_exec_detach in a sandbox, oldest first: a JSON array of status JSON, as sandbox_exec_status returns.',
    inputSchema: z.strictObject({ name: sandboxName }),
    annotations: { readOnlyHint: true, openWorldHint: false },
    handle: async ({ name }, { api, signal }) =>
      json(await api.request({ method: 'GET', path: apiPath('sandboxes', name, 'exec', 'detached') }, signal)),
  }),
]);
