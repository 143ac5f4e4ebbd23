import { Command } from 'commander';
import { apiPath } from '../client/api-client.js';
import type { PreviewUrl } from '../schemas/preview-schemas.js';
import { action, type ClientContext } from './client/client-context.js';
import { printJson, UsageError } from './client/output.js';

/** `sandboxd ports url SANDBOX PORT`: a signed preview URL of a server inside a sandbox. */
export function portsCommand(ctx: ClientContext): Command {
  const ports = new Command('ports').alias('port').description('preview URLs of servers that listen inside a sandbox');
  ports
    .command('url')
    .description('mint a signed preview URL of a port of a sandbox (it works without the API key until it expires) and print it')
    .argument('<sandbox>', 'sandbox name')
    .argument('<port>', 'TCP port inside the sandbox, 1-65535')
    .option('--expires-in <duration>', 'how long the URL works, e.g. 30m, 2h, 7d (default 1h, at most 30d)')
    .option('--path-form', 'print the path form (http://SERVER/sandboxes/NAME/ports/PORT/?...), which needs no DNS for the preview domain')
    .action(
      action(async (sandbox: string, port: string, opts: { expiresIn?: string; pathForm?: boolean }) => {
        if (!/^\d+$/.test(port) || Number(port) < 1 || Number(port) > 65_535) throw new UsageError(`port '${port}': expected a TCP port, 1-65535`);
        const body = opts.expiresIn ? { expires_in: opts.expiresIn } : {};
        const minted = await ctx.connection().api.request<PreviewUrl>({ method: 'POST', path: apiPath('sandboxes', sandbox, 'ports', port, 'url'), body });
        if (ctx.flags.json) return printJson(minted);
        process.stdout.write(`${opts.pathForm ? minted.path_url : minted.url}\n`);
      }),
    );
  return ports;
}
