import { z } from 'zod';
import { STORE_KINDS } from '../domain/store-kinds.js';
import { resourceName, timestamp } from './common.js';

/** SQL text a request may carry (bytes of UTF-8). */
export const MAX_SQL_BYTES = 1024 * 1024;
/** Bound parameters of one statement. */
export const MAX_PARAMS = 1000;
/** Statements of one batch. */
export const MAX_STATEMENTS = 1000;
/** Elements of one command's argv. */
export const MAX_COMMAND_ARGS = 10_000;
export const DEFAULT_MAX_ROWS = 10_000;
export const MAX_MAX_ROWS = 100_000;
export const MAX_TIMEOUT_MS = 60_000;

export const storeKind = z.enum(STORE_KINDS, { error: `must be one of ${STORE_KINDS.join(', ')}` }).meta({
  description: 'sqlite, kv, queue (on the host, or sqlite inside a bound sandbox with config.path); postgres, mysql, redis (external servers)',
});

/** JSON of a store's config: settings, a CA certificate or two, never data. */
export const MAX_CONFIG_BYTES = 64 * 1024;

const config = z
  .record(z.string(), z.unknown(), { error: 'must be a JSON object' })
  .refine((value) => Buffer.byteLength(JSON.stringify(value), 'utf8') <= MAX_CONFIG_BYTES, 'must be at most 64 KiB of JSON');

const sql = z
  .string({ error: 'must be a string' })
  .min(1, 'must not be empty')
  .refine((text) => Buffer.byteLength(text, 'utf8') <= MAX_SQL_BYTES, 'must be at most 1 MiB')
  .meta({ description: "One statement in the engine's dialect; placeholders are the engine's own (sqlite ?, ?NNN, :name; postgres $1; mysql ?)" });

const params = z
  .union([z.array(z.unknown()), z.record(z.string(), z.unknown())], { error: 'must be an array (positional) or an object (named: sqlite only)' })
  .refine((given) => (Array.isArray(given) ? given.length : Object.keys(given).length) <= MAX_PARAMS, `at most ${MAX_PARAMS} parameters`)
  .meta({ description: `Bound parameters, never spliced into the SQL: an array, or an object for :name/@name/$name (sqlite only); at most ${MAX_PARAMS}` });

const maxRows = z
  .int({ error: 'must be an integer' })
  .min(1)
  .max(MAX_MAX_ROWS, `must be at most ${MAX_MAX_ROWS}`)
  .default(DEFAULT_MAX_ROWS)
  .meta({ description: `Rows returned at most (default ${DEFAULT_MAX_ROWS}, at most ${MAX_MAX_ROWS}); more set truncated: true` });

const timeoutMs = z
  .int({ error: 'must be an integer' })
  .min(1)
  .max(MAX_TIMEOUT_MS, `must be at most ${MAX_TIMEOUT_MS}`)
  .optional()
  .meta({ description: 'Cancelled on the server after this many ms: 504 TIMEOUT (default --store-timeout, 10000; at most 60000)' });

export const createStoreBody = z
  .strictObject({
    name: resourceName,
    kind: storeKind,
    sandbox: resourceName.optional().meta({ description: 'The sandbox that owns the store: it is deleted with it; external kinds without a host connect to its address' }),
    config: config.optional().meta({
      description:
        "The engine's settings (e.g. host, port, database, user, url, ssl, max_bytes). password is write-only and encrypted at rest; " +
        'password_env names a server environment variable read at connect; read_only: true refuses /execute and write commands',
    }),
    validate: z.boolean({ error: 'must be true or false' }).optional().meta({ description: 'Connect once before answering (default true): 400 when the store cannot be reached' }),
  })
  .meta({ id: 'CreateStore' });

export const patchStoreBody = z
  .strictObject({
    config: config.meta({ description: 'Merged into the config (null removes a field); a new password replaces the kept one; the open connection is closed' }),
  })
  .meta({ id: 'PatchStore' });

export const storeParams = z.object({ id: z.string().min(1).max(100).meta({ description: 'Store id or name' }) });

export const listStoresQuery = z.strictObject({
  kind: storeKind.optional(),
  sandbox: resourceName.optional().meta({ description: 'Only the stores bound to this sandbox' }),
});

export const queryBody = z
  .strictObject({ sql, params: params.optional(), max_rows: maxRows, timeout_ms: timeoutMs })
  .meta({ id: 'StoreQuery' });

const statement = z.strictObject({ sql, params: params.optional() });

export const executeBody = z
  .strictObject({
    sql: sql.optional().meta({ description: 'One statement; or give statements' }),
    params: params.optional(),
    statements: z
      .array(statement)
      .min(1, 'must hold a statement')
      .max(MAX_STATEMENTS, `at most ${MAX_STATEMENTS} statements`)
      .optional()
      .meta({ description: 'A batch, instead of sql' }),
    transaction: z.boolean({ error: 'must be true or false' }).optional().meta({ description: 'A batch in one transaction (default true); false runs each statement in its own' }),
    max_rows: maxRows,
    timeout_ms: timeoutMs,
  })
  .meta({ id: 'StoreExecute' });

export const commandBody = z
  .strictObject({
    command: z
      .array(z.unknown())
      .min(1, 'must hold the command name')
      .max(MAX_COMMAND_ARGS, `at most ${MAX_COMMAND_ARGS} elements`)
      .meta({ description: 'The argv, command name first (case-insensitive), e.g. ["SET", "k", "v"]; kv and queue arguments may be any JSON' }),
    timeout_ms: timeoutMs,
  })
  .meta({ id: 'StoreCommand' });

export const store = z
  .object({
    id: z.string(),
    name: z.string(),
    kind: storeKind,
    sandbox: z.string().nullable().meta({ description: 'The owning sandbox; null for none' }),
    config: z.record(z.string(), z.unknown()).meta({
      description: 'The config without secrets: password_set: true where a password is kept, and a url\'s password shown as ****',
    }),
    size_bytes: z.int().optional().meta({ description: 'sqlite, kv, queue: bytes on disk' }),
    status: z.enum(['ok', 'unreachable']).optional().meta({ description: 'postgres, mysql, redis: how the last use went' }),
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'Store' });

const rows = z.array(z.array(z.unknown())).meta({ description: 'Rows as arrays in column order; big integers and decimals as strings, binary as base64' });
const insertId = z.union([z.number(), z.string(), z.null()]);
const warnings = z
  .array(z.object({ level: z.string().meta({ description: '`warning`, `note` or `error`' }), code: z.int(), message: z.string() }))
  .optional()
  .meta({
    description:
      'mysql stores: what the engine warned of while the statement ran (at most 16; a value cut to NULL past max_allowed_packet, a value adjusted to fit its column), present only when it warned',
  });

export const queryResult = z
  .object({
    columns: z.array(z.string()),
    rows,
    row_count: z.int(),
    truncated: z.boolean().meta({ description: 'More rows existed than max_rows, or the rows passed the 8 MiB a response may carry' }),
    column_types: z.array(z.string()),
    warnings,
    duration_ms: z.int(),
  })
  .meta({ id: 'StoreQueryResult' });

export const statementResult = z.object({
  rows_affected: z.int(),
  last_insert_id: insertId.meta({ description: 'sqlite and mysql; null on postgres; beyond 2^53 as a string' }),
  last_insert_rowid: insertId.meta({ description: 'The same as last_insert_id (the name clients of sqlite stores know)' }),
  columns: z.array(z.string()).optional().meta({ description: 'When the statement returned rows (RETURNING)' }),
  rows: rows.optional(),
  truncated: z.boolean().optional().meta({ description: 'With rows: some were left out (max_rows or the 8 MiB cap)' }),
  warnings,
});

export const executeResult = z
  .union([
    statementResult.extend({ duration_ms: z.int() }),
    z.object({ results: z.array(statementResult), rows_affected: z.int().meta({ description: 'The sum over the statements' }), duration_ms: z.int() }),
  ])
  .meta({ id: 'StoreExecuteResult' });

export const commandResult = z.object({ result: z.unknown() }).meta({ id: 'StoreCommandResult' });

export type CreateStoreInput = z.infer<typeof createStoreBody>;
export type PatchStoreInput = z.infer<typeof patchStoreBody>;
export type ListStoresQuery = z.infer<typeof listStoresQuery>;
export type QueryInput = z.input<typeof queryBody>;
export type ExecuteInput = z.input<typeof executeBody>;
export type CommandInput = z.infer<typeof commandBody>;
export type StoreBody = z.infer<typeof store>;
export type QueryResultBody = z.infer<typeof queryResult>;
export type StatementResultBody = z.infer<typeof statementResult>;
export type ExecuteResultBody = z.infer<typeof executeResult>;
export type CommandResultBody = z.infer<typeof commandResult>;
