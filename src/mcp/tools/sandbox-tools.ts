import { z } from 'zod';
import { labels } from '../../schemas/common.js';
import { createSandboxBody } from '../../schemas/sandbox-schemas.js';
import { apiPath } from '../../client/api-client.js';
import { defineTool, json, text, type Tool } from '../tool.js';
import { sandboxName } from './arguments.js';

const byName = z.strictObject({ name: sandboxName });

/** Persistent sandboxes: create, list, inspect, start, stop, remove. */
export const sandboxTools: Tool[] = [
  defineTool({
    name: 'sandbox_create',
    title: 'Create a sandbox',
    description:
      'Create and start a persistent sandbox: an isolated Linux container that keeps its files between calls until ' +
      'sandbox_remove. Commands run as user "sandbox" in /workspace. Defaults: the server\'s default image (normally ' +
      'sandboxd/base:bookworm: Debian with bash, git, curl, python3), 1 vCPU, 512 MiB memory, profile moderate ' +
      '(network on; restrictive has no network and a read-only root). Other images: sandboxd/python:bookworm (+ pip, ' +
      'venv), sandboxd/node:bookworm (+ Node.js, npm). Returns the sandbox as JSON (name, uuid, status, image, vcpus, memory_mb, profile, labels, ' +
      'created_at). Then use sandbox_exec and the sandbox_file_* tools on it. For a single command, sandbox_run is simpler.',
    inputSchema: z.strictObject({
      ...createSandboxBody.shape,
      name: sandboxName.meta({ description: 'Unique name: lowercase letters, digits, _ . - (at most 63), e.g. "py-work"' }),
    }),
    annotations: { destructiveHint: false, openWorldHint: false },
    handle: async (args, { api, signal }) => json(await api.request({ method: 'POST', path: '/sandboxes', body: args }, signal)),
  }),

  defineTool({
    name: 'sandbox_list',
    title: 'List sandboxes',
    description:
      'List the sandboxes that exist, optionally only those carrying every given label. Returns a JSON array of ' +
      '{name, uuid, status (running|stopped|archived), backend, ip}; [] when there are none.',
    inputSchema: z.strictObject({
      labels: labels.optional().meta({ description: 'Only sandboxes whose labels include all of these, e.g. {"project": "demo"}' }),
    }),
    annotations: { readOnlyHint: true, openWorldHint: false },
    handle: async ({ labels: wanted }, { api, signal }) => {
      const label = Object.entries(wanted ?? {}).map(([key, value]) => `${key}:${value}`);
      return json(await api.request({ method: 'GET', path: '/sandboxes', query: { label } }, signal));
    },
  }),

  defineTool({
    name: 'sandbox_get',
    title: 'Inspect a sandbox',
    description:
      'Show one sandbox with its metadata as JSON: status as the engine observes it (running, stopped), image, vcpus, ' +
      'memory_mb, profile, labels, description, created_at, last_activity_at, expires_at, ip while running.',
    inputSchema: byName,
    annotations: { readOnlyHint: true, openWorldHint: false },
    handle: async ({ name }, { api, signal }) => json(await api.request({ method: 'GET', path: apiPath('sandboxes', name) }, signal)),
  }),

  defineTool({
    name: 'sandbox_start',
    title: 'Start a sandbox',
    description: 'Start a stopped sandbox; its files are as they were. Does nothing to a running one. Returns the sandbox as JSON.',
    inputSchema: byName,
    annotations: { idempotentHint: true, destructiveHint: false, openWorldHint: false },
    handle: async ({ name }, { api, signal }) =>
      json(await api.request({ method: 'POST', path: apiPath('sandboxes', name, 'start') }, signal)),
  }),

  defineTool({
    name: 'sandbox_stop',
    title: 'Stop a sandbox',
    description:
      'Stop a sandbox: its processes end, its files stay (except /workspace in the restrictive profile, a tmpfs) and ' +
      'it uses no CPU or memory until sandbox_start. Does nothing to a stopped one. Returns the sandbox as JSON.',
    inputSchema: byName,
    annotations: { idempotentHint: true, destructiveHint: false, openWorldHint: false },
    handle: async ({ name }, { api, signal }) =>
      json(await api.request({ method: 'POST', path: apiPath('sandboxes', name, 'stop') }, signal)),
  }),

  defineTool({
    name: 'sandbox_remove',
    title: 'Remove a sandbox',
    description: 'Remove a sandbox and everything in it, for good. Returns a confirmation such as "sandbox \'x\' removed".',
    inputSchema: byName,
    annotations: { destructiveHint: true, openWorldHint: false },
    handle: async ({ name }, { api, signal }) =>
      text(await api.request<string>({ method: 'DELETE', path: apiPath('sandboxes', name) }, signal)),
  }),
];
