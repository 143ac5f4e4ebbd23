import { Command } from 'commander';
import { apiPath } from '../client/api-client.js';
import { STORE_KINDS } from '../domain/store-kinds.js';
import { store as storeSchema, type CommandResultBody, type ExecuteResultBody, type QueryResultBody, type StoreBody } from '../schemas/store-schemas.js';
import { collect } from './cli-config.js';
import { action, type ClientContext } from './client/client-context.js';
import { printRecord, type FieldLayout } from './client/fields.js';
import { jsonInput, jsonObject, jsonOrText, oneOf, settings, textInput } from './client/inputs.js';
import { age, colours, dim, integer, printJson, printList, printTable, printValue, sizeText, UsageError } from './client/output.js';
import { removeCommand } from './client/remove-command.js';

interface ConfigOptions {
  config?: string;
  set?: string[];
}

interface StatementOptions {
  param?: string[];
  params?: string;
  maxRows?: string;
  timeout?: string;
  transaction?: boolean;
}

/** `sandboxd store ...`: sqlite, kv and queue stores on the host, postgres, mysql and redis on servers. */
export function storeCommand(ctx: ClientContext): Command {
  const store = new Command('store').alias('stores').description('create, list, query and delete stores (sqlite, kv, queue, postgres, mysql, redis)');
  const api = () => ctx.connection().api;

  store
    .command('create')
    .description('create a store; prints it')
    .argument('<name>', 'store name')
    .requiredOption('--kind <kind>', `${STORE_KINDS.join(', ')}`)
    .option('--sandbox <name>', 'the sandbox that owns it (deleted with it; a server kind without host connects to it)')
    .option('--config <json>', "the engine's settings as a JSON object (@FILE, - for standard input), e.g. '{\"url\": \"postgres://...\"}'")
    .option('--set <key=value>', 'one setting (the value read as JSON when it is JSON: 5432, true); repeatable, after --config', collect)
    .option('--no-validate', 'do not connect once before answering')
    .action(
      action(async (name: string, opts: ConfigOptions & { kind: string; sandbox?: string; validate: boolean }) => {
        const config = await configOf(opts);
        const body = {
          name,
          kind: oneOf(opts.kind, STORE_KINDS, '--kind'),
          ...(opts.sandbox ? { sandbox: opts.sandbox } : {}),
          ...(config ? { config } : {}),
          ...(opts.validate ? {} : { validate: false }),
        };
        printStore(await api().request<StoreBody>({ method: 'POST', path: '/stores', body }), ctx.flags.json);
      }),
    );

  store
    .command('list')
    .alias('ls')
    .description('list stores: name, kind, sandbox, size or state, age')
    .option('--kind <kind>', 'only stores of this kind')
    .option('--sandbox <name>', 'only the stores of this sandbox')
    .action(
      action(async (opts: { kind?: string; sandbox?: string }) => {
        const query = { ...(opts.kind ? { kind: oneOf(opts.kind, STORE_KINDS, '--kind') } : {}), ...(opts.sandbox ? { sandbox: opts.sandbox } : {}) };
        const list = await api().request<StoreBody[]>({ method: 'GET', path: '/stores', query });
        printList(list, ctx.flags.json, ['NAME', 'KIND', 'SANDBOX', 'SIZE', 'STATE', 'AGE'], (s) => [s.name, s.kind, s.sandbox ?? '-', s.size_bytes === undefined ? '-' : sizeText(s.size_bytes), s.status ?? '-', age(s.created_at)]);
      }),
    );

  store
    .command('get')
    .description('show a store (its config without secrets)')
    .argument('<store>', 'store name or id')
    .action(action(async (name: string) => printStore(await api().request<StoreBody>({ method: 'GET', path: apiPath('stores', name) }), ctx.flags.json)));

  store
    .command('update')
    .description("change a store's config: merged (a null value removes a setting); prints it")
    .argument('<store>', 'store name or id')
    .option('--config <json>', 'settings as a JSON object (@FILE, -)')
    .option('--set <key=value>', 'one setting (JSON when it is JSON; null removes it); repeatable', collect)
    .action(
      action(async (name: string, opts: ConfigOptions) => {
        const config = await configOf(opts);
        if (!config) throw new UsageError('store update: give --config JSON or --set KEY=VALUE');
        printStore(await api().request<StoreBody>({ method: 'PATCH', path: apiPath('stores', name), body: { config } }), ctx.flags.json);
      }),
    );

  removeCommand(store, ctx, { description: "delete stores (a host store's file goes with it; an external server's data is never touched)", names: 'store names or ids', argument: 'store', route: (name) => apiPath('stores', name) });

  statementOptions(
    store
      .command('query')
      .description('run a read-only statement (sqlite, postgres, mysql); prints the rows as a table')
      .argument('<store>', 'store name or id')
      .argument('<sql>', 'one statement (@FILE, - for standard input); placeholders are the engine\'s own (? or $1)'),
  ).action(
    action(async (name: string, sql: string, opts: StatementOptions) => {
      const result = await api().request<QueryResultBody>({ method: 'POST', path: apiPath('stores', name, 'query'), body: await statementBody(sql, opts) });
      if (ctx.flags.json) return printJson(result);
      printRows(result.columns, result.rows, result.truncated);
      for (const w of result.warnings ?? []) process.stderr.write(`${w.level} ${w.code}: ${w.message}\n`);
    }),
  );

  statementOptions(
    store
      .command('execute')
      .alias('exec')
      .description('run statements that write; several are one batch, in one transaction unless --no-transaction')
      .argument('<store>', 'store name or id')
      .argument('<sql...>', 'statements (each also @FILE or -); --param binds the first one\'s placeholders'),
  )
    .option('--no-transaction', 'run each statement of a batch in its own transaction')
    .action(
      action(async (name: string, sql: string[], opts: StatementOptions) => {
        const [first, ...more] = await Promise.all(sql.map(textInput));
        if ((opts.param || opts.params) && more.length > 0) throw new UsageError('--param and --params bind one statement: give them with a single SQL');
        const body =
          more.length === 0
            ? await statementBody(first ?? '', opts)
            : { statements: [first, ...more].map((text) => ({ sql: text })), ...(opts.transaction === false ? { transaction: false } : {}), ...limits(opts) };
        const result = await api().request<ExecuteResultBody>({ method: 'POST', path: apiPath('stores', name, 'execute'), body });
        if (ctx.flags.json) return printJson(result);
        printExecuted(result);
      }),
    );

  store
    .command('command')
    .alias('cmd')
    .description('run a command of a kv, queue or redis store, e.g. `store command cache SET k v`; prints its result')
    .argument('<store>', 'store name or id')
    .argument('<words...>', 'the command and its arguments (put -- before words that start with -)')
    .option('--timeout <ms>', 'cancel it after this many milliseconds')
    .action(
      action(async (name: string, words: string[], opts: { timeout?: string }) => {
        const body = { command: words, ...(opts.timeout ? { timeout_ms: integer(opts.timeout, '--timeout') } : {}) };
        const { result } = await api().request<CommandResultBody>({ method: 'POST', path: apiPath('stores', name, 'command'), body });
        printValue(result, ctx.flags.json);
      }),
    );
  return store;
}

function statementOptions(command: Command): Command {
  return command
    .option('--param <value>', 'a bound parameter, in order (read as JSON when it is JSON: 1, true, null; else text); repeatable', collect)
    .option('--params <json>', 'the parameters as a JSON array, or an object for named ones (sqlite)')
    .option('--max-rows <n>', 'rows returned at most (default 10000)')
    .option('--timeout <ms>', 'cancel it after this many milliseconds (default 10000, at most 60000)');
}

const limits = (opts: StatementOptions) => ({
  ...(opts.maxRows ? { max_rows: integer(opts.maxRows, '--max-rows') } : {}),
  ...(opts.timeout ? { timeout_ms: integer(opts.timeout, '--timeout') } : {}),
});

async function statementBody(sql: string, opts: StatementOptions) {
  if (opts.param && opts.params) throw new UsageError('give --param or --params, not both');
  const params = opts.params ? await jsonInput(opts.params, '--params') : opts.param?.map(jsonOrText);
  return { sql: await textInput(sql), ...(params !== undefined ? { params } : {}), ...limits(opts) };
}

async function configOf(opts: ConfigOptions): Promise<Record<string, unknown> | undefined> {
  if (!opts.config && !opts.set) return undefined;
  return { ...(opts.config ? await jsonObject(opts.config, '--config') : {}), ...settings(opts.set, '--set') };
}

/** A cell for people: NULL, text as it is, anything else as JSON. */
const cellText = (value: unknown) => (value === null ? 'NULL' : typeof value === 'string' ? value : JSON.stringify(value));

function printRows(columns: string[], rows: unknown[][], truncated: boolean | undefined): void {
  printTable(columns, rows.map((row) => row.map(cellText)));
  const note = `(${rows.length} row${rows.length === 1 ? '' : 's'}${truncated ? ', truncated: more rows exist than --max-rows' : ''})`;
  process.stderr.write(`${dim(note, colours(process.stderr))}\n`);
}

function printExecuted(result: ExecuteResultBody): void {
  if ('results' in result) {
    printTable(
      ['STATEMENT', 'ROWS AFFECTED', 'LAST INSERT ID'],
      result.results.map((r, i) => [String(i + 1), String(r.rows_affected), r.last_insert_id === null ? '-' : String(r.last_insert_id)]),
    );
    return;
  }
  process.stdout.write(`rows affected: ${result.rows_affected}${result.last_insert_id === null ? '' : `, last insert id: ${result.last_insert_id}`}\n`);
  if (result.columns && result.rows) printRows(result.columns, result.rows, result.truncated);
}

const STORE_LAYOUT: FieldLayout<StoreBody> = {
  first: ['name', 'kind', 'sandbox', 'status', 'size_bytes', 'config'],
  show: { created_at: { as: 'created' }, updated_at: { as: 'updated' } },
};

function printStore(found: StoreBody, json: boolean): void {
  printRecord(storeSchema, found, STORE_LAYOUT, json);
}
