import { z } from 'zod';
import { className, defineClassFields, methodName, objectId } from '../../schemas/object-schemas.js';
import { apiPath } from '../../client/api-client.js';
import { defineTool, json, type Tool } from '../tool.js';

const classArgument = className.meta({ description: 'Object class name (registered with object_class_define)' });
const objectIdArgument = objectId.meta({ description: 'The object within its class, e.g. a user or a room id' });

/**
 * Durable objects: addressable actors whose state (a JSON key-value storage) lives on the
 * server and whose methods run in their own sandbox, one call at a time.
 */
export const objectTools: Tool[] = [
  defineTool({
    name: 'object_class_define',
    title: 'Define a durable-object class',
    description:
      'Register (or update) a durable-object class: a node ES module or a python module whose top-level functions ' +
      '`(args, ctx)` are its methods (node may also `export default class`). In a method, ctx.storage.get(key, default), ' +
      'put(key, value), delete(key), list({prefix}), deleteAll() (python: delete_all) read and write the object\'s storage, ' +
      'and ctx.setAlarm({in_seconds}, method, args) schedules a later call. A call\'s writes are committed only when the method ' +
      'returns (a throw writes nothing). The source is syntax-checked; an error names the line. Returns the class with its version.',
    inputSchema: defineClassFields,
    annotations: { destructiveHint: false, idempotentHint: true, openWorldHint: false },
    handle: async (args, { api, signal }) => json(await api.request({ method: 'POST', path: '/objects/classes', body: args }, signal)),
  }),

  defineTool({
    name: 'object_call',
    title: 'Call a durable object',
    description:
      'Call a method of the object (class, object_id), creating it on first use and waking it if it hibernates; calls to one ' +
      'object run one at a time in order. Returns the method\'s return value as JSON. With idempotency_key, repeating the ' +
      'call (within 24 h) runs nothing and returns the first result, so the storage changes once.',
    inputSchema: z.strictObject({
      class: classArgument,
      object_id: objectIdArgument,
      method: methodName.meta({ description: 'Method to call (names starting with _ are private)' }),
      args: z.record(z.string(), z.unknown()).optional().meta({ description: "The method's arguments (a JSON object), default {}" }),
      idempotency_key: z.string().min(1).max(128).optional().meta({ description: 'Makes a retried call apply once' }),
    }),
    annotations: { destructiveHint: false, openWorldHint: false },
    handle: async ({ class: klass, object_id, method, args, idempotency_key }, { api, signal }) =>
      json(
        await api.request(
          {
            method: 'POST',
            path: apiPath('objects', klass, object_id, 'call', method),
            body: args ?? {},
            headers: { 'x-sandboxd-client': 'mcp', ...(idempotency_key ? { 'idempotency-key': idempotency_key } : {}) },
          },
          signal,
        ),
      ),
  }),

  defineTool({
    name: 'object_get',
    title: 'Inspect a durable object',
    description: 'Show an object as JSON: status (active or hibernating), its storage, alarm, sandbox, call count and last call time.',
    inputSchema: z.strictObject({ class: classArgument, object_id: objectIdArgument }),
    annotations: { readOnlyHint: true, openWorldHint: false },
    handle: async ({ class: klass, object_id }, { api, signal }) => json(await api.request({ method: 'GET', path: apiPath('objects', klass, object_id) }, signal)),
  }),

  defineTool({
    name: 'object_list',
    title: 'List durable objects',
    description: 'List objects as a JSON array, optionally of one class or status (active, hibernating).',
    inputSchema: z.strictObject({
      class: classArgument.optional(),
      status: z.enum(['active', 'hibernating']).optional(),
    }),
    annotations: { readOnlyHint: true, openWorldHint: false },
    handle: async (args, { api, signal }) =>
      json(await api.request({ method: 'GET', path: '/objects', query: Object.fromEntries(Object.entries(args).filter(([, v]) => v !== undefined)) as Record<string, string> }, signal)),
  }),

  defineTool({
    name: 'object_delete',
    title: 'Delete a durable object',
    description: "Delete an object with its storage, alarm and call log, and remove its managed sandbox. This cannot be undone.",
    inputSchema: z.strictObject({ class: classArgument, object_id: objectIdArgument }),
    annotations: { destructiveHint: true, openWorldHint: false },
    handle: async ({ class: klass, object_id }, { api, signal }) => {
      const object = await api.request<{ id: string }>({ method: 'GET', path: apiPath('objects', klass, object_id) }, signal);
      return json(await api.request({ method: 'DELETE', path: apiPath('objects', object.id) }, signal));
    },
  }),
];
