import { z } from 'zod';
import { commandBody, createStoreBody, executeBody, listStoresQuery, queryBody } from '../../schemas/store-schemas.js';
import { apiPath } from '../../client/api-client.js';
import { defineTool, json, text, type Tool } from '../tool.js';

const storeRef = z.string().min(1).max(100).meta({ description: 'Store id or name (see store_list)' });

const VIEW =
  'JSON {id, name, kind, sandbox, config (no secrets: password_set: true, a url with ****), size_bytes (host stores), ' +
  'status (external stores: ok or unreachable), created_at, updated_at}';

/** Durable stores: SQL and key-value stores an assistant creates, queries and writes. */
export const storeTools: Tool[] = [
  defineTool({
    name: 'store_create',
    title: 'Create a durable store',
    description:
      'Create a store: kind sqlite (SQL on the server\'s disk, or inside a sandbox with config.path), kv (Redis-like GET/SET/INCR/' +
      'EXPIRE/SCAN commands), queue (ENQUEUE/DEQUEUE/ACK with visibility timeouts), or postgres, mysql, redis on a server ' +
      '(config: host, port, database, user, password or url; password is never shown again). With sandbox, the store belongs ' +
      'to that sandbox and is deleted with it; a server kind without host then connects to the sandbox. config.read_only: ' +
      'true allows only reads. Returns ' + VIEW,
    inputSchema: z.strictObject(createStoreBody.shape),
    annotations: { destructiveHint: false, openWorldHint: true },
    handle: async (args, { api, signal }) => json(await api.request({ method: 'POST', path: '/stores', body: args }, signal)),
  }),

  defineTool({
    name: 'store_list',
    title: 'List durable stores',
    description: 'Every store, in name order, as a JSON array of stores as store_create returns them.',
    inputSchema: z.strictObject(listStoresQuery.shape),
    annotations: { readOnlyHint: true, openWorldHint: false },
    handle: async (query, { api, signal }) =>
      json(await api.request({ method: 'GET', path: '/stores', ...(Object.keys(query).length > 0 ? { query } : {}) }, signal)),
  }),

  defineTool({
    name: 'store_query',
    title: 'Query a SQL store (read-only)',
    description:
      'Run one read-only SQL statement on a sqlite, postgres or mysql store, with params bound (sqlite ?, postgres $1, ' +
      'mysql ?). A statement that writes is refused: use store_execute. Returns JSON {columns, rows (arrays in column ' +
      'order), row_count, truncated (more than max_rows, default 10000), column_types, duration_ms}.',
    inputSchema: z.strictObject({ store: storeRef, ...queryBody.shape }),
    annotations: { readOnlyHint: true, openWorldHint: true },
    handle: async ({ store, ...body }, { api, signal }) => json(await api.request({ method: 'POST', path: apiPath('stores', store, 'query'), body }, signal)),
  }),

  defineTool({
    name: 'store_execute',
    title: 'Write to a SQL store',
    description:
      'Run a SQL statement that writes (sql + params), or a batch (statements: [{sql, params}], in one transaction unless ' +
      'transaction is false), on a sqlite, postgres or mysql store. Returns JSON {rows_affected, last_insert_id, columns/rows ' +
      'for RETURNING, duration_ms}, or for a batch {results, rows_affected, duration_ms}.',
    inputSchema: z.strictObject({ store: storeRef, ...executeBody.shape }),
    annotations: { destructiveHint: true, openWorldHint: true },
    handle: async ({ store, ...body }, { api, signal }) => json(await api.request({ method: 'POST', path: apiPath('stores', store, 'execute'), body }, signal)),
  }),

  defineTool({
    name: 'store_command',
    title: 'Run a kv, queue or redis command',
    description:
      'Run one command on a kv, queue or redis store, as an argv array with the command name first, e.g. ["SET", "k", "v", ' +
      '"EX", 60], ["GET", "k"], ["ENQUEUE", {"job": 1}], ["DEQUEUE", "COUNT", 10], ["ACK", receipt]. Returns JSON {result}.',
    inputSchema: z.strictObject({ store: storeRef, ...commandBody.shape }),
    annotations: { destructiveHint: true, openWorldHint: true },
    handle: async ({ store, ...body }, { api, signal }) => json(await api.request({ method: 'POST', path: apiPath('stores', store, 'command'), body }, signal)),
  }),

  defineTool({
    name: 'store_delete',
    title: 'Delete a durable store',
    description: "Delete a store: a sqlite, kv or queue store's data is deleted with it; a postgres, mysql or redis server's data is never touched.",
    inputSchema: z.strictObject({ store: storeRef }),
    annotations: { destructiveHint: true, openWorldHint: false },
    handle: async ({ store }, { api, signal }) => text(await api.request<string>({ method: 'DELETE', path: apiPath('stores', store) }, signal)),
  }),
];
