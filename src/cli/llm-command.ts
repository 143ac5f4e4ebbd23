import { Command } from 'commander';
import type { z } from 'zod';
import { apiPath } from '../client/api-client.js';
import { llmKey, type llmSandboxUsage, type llmUsageReport } from '../schemas/llm-schemas.js';
import { action, type ClientContext } from './client/client-context.js';
import { printRecord } from './client/fields.js';
import { readStdin } from './client/inputs.js';
import { printJson, printList, printTable, UsageError } from './client/output.js';
import { removeCommand } from './client/remove-command.js';

type LlmKey = z.infer<typeof llmKey>;
type Sums = z.infer<typeof llmUsageReport>['totals'];

/** `sandboxd llm key list|set|rm` and `sandboxd llm usage`: the LLM gateway's provider keys and token usage. */
export function llmCommand(ctx: ClientContext): Command {
  const llm = new Command('llm').description("the LLM gateway: provider keys (kept out of sandboxes) and token usage");
  const api = () => ctx.connection().api;
  const key = llm.command('key').alias('keys').description("set, list and remove the gateway's provider keys (admin keys)");

  key
    .command('list')
    .alias('ls')
    .description('providers and whether the gateway has a key for each (never the key)')
    .action(
      action(async () => {
        const keys = await api().request<LlmKey[]>({ method: 'GET', path: '/llm/keys' });
        printList(keys, ctx.flags.json, ['PROVIDER', 'CONFIGURED', 'SOURCE', 'LAST 4', 'BASE URL'], (k) => [k.provider, k.configured ? 'yes' : 'no', k.source ?? '-', k.last4 ?? '-', k.base_url]);
      }),
    );

  key
    .command('set')
    .description("set a provider's key: read from standard input (kept encrypted, never shown again) or a server environment variable's name")
    .argument('<provider>', 'openai, anthropic, google, or a name of your own (with --base-url)')
    .option('--stdin', 'read the key from standard input, e.g. `printenv OPENAI_API_KEY | sandboxd llm key set openai --stdin`')
    .option('--env <name>', "the name of a server environment variable that holds the key, read at each request")
    .option('--base-url <url>', "send the provider's requests there (required for a provider sandboxd does not know: an OpenAI-compatible API)")
    .action(
      action(async (provider: string, opts: { stdin?: boolean; env?: string; baseUrl?: string }) => {
        if (Boolean(opts.stdin) === (opts.env !== undefined)) throw new UsageError('llm key set: give the key with --stdin or name a server variable with --env (one of them)');
        const value = opts.stdin ? (await readStdin()).trim() : undefined;
        if (opts.stdin && !value) throw new UsageError('llm key set --stdin: standard input was empty');
        const body = { ...(value ? { value } : {}), ...(opts.env ? { env: opts.env } : {}), ...(opts.baseUrl ? { base_url: opts.baseUrl } : {}) };
        printRecord(llmKey, await api().request<LlmKey>({ method: 'PUT', path: apiPath('llm', 'keys', provider), body }), {}, ctx.flags.json);
      }),
    );

  removeCommand(key, ctx, { description: "remove providers' keys", names: 'providers', argument: 'provider', route: (provider) => apiPath('llm', 'keys', provider) });

  llm
    .command('usage')
    .description('token usage through the gateway: totals per sandbox and per model (of one sandbox: per model and per day)')
    .argument('[sandbox]', "one sandbox's usage of all time")
    .option('--since <day>', 'first day, YYYY-MM-DD (default 29 days before --until)')
    .option('--until <day>', 'last day, YYYY-MM-DD (default today, UTC)')
    .option('--provider <provider>', 'only this provider')
    .action(
      action(async (sandbox: string | undefined, opts: { since?: string; until?: string; provider?: string }) => {
        if (sandbox) {
          const usage = await api().request<z.infer<typeof llmSandboxUsage>>({ method: 'GET', path: apiPath('llm', 'usage', sandbox) });
          if (ctx.flags.json) return printJson(usage);
          return usageTable('DAY', usage.by_day.map((d) => [d.day, d]), usage.totals);
        }
        const query = { ...(opts.since ? { since: opts.since } : {}), ...(opts.until ? { until: opts.until } : {}), ...(opts.provider ? { provider: opts.provider } : {}) };
        const usage = await api().request<z.infer<typeof llmUsageReport>>({ method: 'GET', path: '/llm/usage', query });
        if (ctx.flags.json) return printJson(usage);
        usageTable('SANDBOX', usage.by_sandbox.map((s) => [s.sandbox, s]), usage.totals);
      }),
    );
  return llm;
}

/** Rows of token sums under a first column, and a TOTAL row. */
function usageTable(first: string, rows: [string, Sums][], totals: Sums): void {
  const cells = ([label, sums]: [string, Sums]) => [label, String(sums.requests), String(sums.input_tokens), String(sums.output_tokens), String(sums.errors)];
  printTable([first, 'REQUESTS', 'INPUT TOKENS', 'OUTPUT TOKENS', 'ERRORS'], [...rows.map(cells), cells(['TOTAL', totals])]);
}
