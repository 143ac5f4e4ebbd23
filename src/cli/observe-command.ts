import { Command } from 'commander';
import { apiPath } from '../client/api-client.js';
import { collect } from './cli-config.js';
import { action, type ClientContext } from './client/client-context.js';
import { sseEvents } from '../client/sse-events.js';
import { colours, dim, printJson } from './client/output.js';

/** Fields of an audit entry or event that its line shows in their own columns. */
const SHOWN = new Set(['timestamp', 'event', 'type', 'sandbox', 'sandbox_uuid', 'id', 'labels']);

/** `sandboxd logs NAME` (the audit log) and `sandboxd events [--sandbox NAME]` (the live stream). */
export function observeCommands(ctx: ClientContext): Command[] {
  const logs = new Command('logs')
    .description("a sandbox's audit log, oldest first")
    .argument('<name>', 'sandbox name')
    .action(
      action(async (name: string) => {
        const entries = await ctx.connection().api.request<Record<string, unknown>[]>({ method: 'GET', path: apiPath('sandboxes', name, 'logs') });
        if (ctx.flags.json) return printJson(entries);
        for (const entry of entries) process.stdout.write(`${line(entry, false)}\n`);
      }),
    );

  const events = new Command('events')
    .description('follow the live event stream (the server must run with --events); Ctrl-C ends it')
    .option('--sandbox <name>', 'only events of this sandbox')
    .option('--type <type>', 'only events of this type, e.g. sandbox.created; repeatable', collect)
    .action(
      action(async (opts: { sandbox?: string; type?: string[] }) => {
        const query = { ...(opts.sandbox ? { sandbox: opts.sandbox } : {}), ...(opts.type ? { type: opts.type } : {}) };
        const abort = new AbortController();
        process.once('SIGINT', () => abort.abort());
        try {
          const response = await ctx.connection().open({ method: 'GET', path: '/events', query, accept: 'text/event-stream' }, abort.signal);
          for await (const event of sseEvents(response)) {
            const data = JSON.parse(event.data) as Record<string, unknown>;
            // One JSON object per line (NDJSON): a script reads the stream line by line.
            process.stdout.write(ctx.flags.json ? `${JSON.stringify(data)}\n` : `${line(data, true)}\n`);
          }
        } catch (err) {
          if (!abort.signal.aborted) throw err;
        }
      }),
    );
  return [logs, events];
}

/** `TIME  EVENT  SANDBOX  key=value...`: one entry or event for people. */
function line(entry: Record<string, unknown>, withSandbox: boolean): string {
  const on = colours(process.stdout);
  const details = Object.entries({ ...entry, ...((entry.metadata as object | undefined) ?? {}) })
    .filter(([key]) => !SHOWN.has(key) && key !== 'metadata')
    .map(([key, value]) => `${key}=${typeof value === 'string' ? value : JSON.stringify(value)}`)
    .join(' ');
  const name = String(entry.event ?? entry.type ?? '');
  const subject = withSandbox && entry.sandbox ? `${String(entry.sandbox)}  ` : '';
  return `${dim(String(entry.timestamp ?? ''), on)}  ${name.padEnd(24)}  ${subject}${details}`.trimEnd();
}
