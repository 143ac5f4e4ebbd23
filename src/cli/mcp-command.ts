import { Command, Option } from 'commander';
import { BACKEND_IDS } from '../domain/backend-ids.js';
import { collect, configFromOptions, fail } from './cli-config.js';
import type { Tool } from '../mcp/tool.js';
import type { McpTarget } from './mcp-target.js';

/**
 * `sandboxd mcp`: the MCP tool server on stdio. Stdout carries JSON-RPC only; logs go to
 * stderr. It hosts the service in-process on the data directory, or works through a running
 * server's HTTP API (`--server`, or the `sandboxd serve` that owns the data directory).
 */
export function mcpCommand(): Command {
  return new Command('mcp')
    .description('serve the MCP tool server on stdio (JSON-RPC 2.0) for AI assistants')
    .option('--config <file>', 'TOML configuration file')
    .option('--data-dir <dir>', 'state directory (SERVICE_DATA_DIR)')
    .option('--server <url>', 'work through this running sandboxd server instead of in-process (SANDBOXD_URL, SERVICE_URL)')
    .option('--api-key <key>', "key for the server's API; repeatable (SERVICE_API_KEY)", collect)
    .option('--api-key-file <file>', 'file of keys, one per line, # comments')
    .option(
      '--tools <list>',
      'tools to offer, comma-separated: tool names, globs (sandbox_*) and profiles: core (15 everyday tools), full (default), or a domain (sandboxes, commands, stores, objects, orchestrations, ...) (SANDBOXD_MCP_TOOLS, SERVICE_MCP_TOOLS)',
    )
    .option('--allow-sudo-exec', 'in-process: accept exec requests with sudo: true')
    .option('--max-sandboxes <n>', 'in-process: most sandboxes that may exist at once, 0 = unlimited')
    .addOption(new Option('--backend <name>', 'in-process: isolation backend').choices(BACKEND_IDS))
    .option('--default-image <image>', 'in-process: image of sandboxes that name none')
    .option('--batch-concurrency <n>', 'in-process: most commands of one batch that run at once (default 4)')
    .option('--image-detection <table>', 'in-process: program=image entries for runs that name no image')
    .option('--pool-size <n>', 'in-process: ready pool instances kept per (image, profile), 0 = none (default 2)')
    .option('--pool-sizes <table>', 'in-process: image[@profile]=n entries, warmed at start')
    .option('--pids-limit <n>', 'in-process: process limit of every sandbox')
    .option('--secret-key-file <file>', 'in-process: 32-byte key that encrypts secrets at rest (default <data-dir>/secret.key)')
    .option('--policy-file <file>', 'in-process: policy rules, TOML or JSON by extension')
    .addOption(new Option('--policy-mode <mode>', 'in-process: enforce or audit').choices(['enforce', 'audit']))
    .option('--log-format <format>', 'pretty (readable lines), json, or auto: pretty when stderr is a terminal (default)')
    .option('--log-level <level>', 'fatal, error, warn, info, debug, trace or silent (logs go to stderr)')
    .action(async (opts: Record<string, unknown>) => {
      // Stdout is the protocol: whatever a library prints with console.log goes to stderr instead.
      console.log = console.info = console.debug = console.error;
      const { server: serverUrl, tools: toolList, ...rest } = opts;
      const config = configFromOptions(rest);
      if (!config) return;
      // Loaded here, not at the top: the client commands start without the service's modules.
      const [{ StdioServerTransport }, { createMcpServer }, { SecretKeyError }, { DataDirLockedError }, { createLogger }, { McpTargetError, openMcpTarget }, { PolicyFileError }, { domainTools, domainToolSets }, { selectTools, toolProfiles, ToolSetError }] =
        await Promise.all([
          import('@modelcontextprotocol/sdk/server/stdio.js'),
          import('../mcp/server.js'),
          import('../services/support/secret-box.js'),
          import('../state/data-dir-lock.js'),
          import('../telemetry/logger.js'),
          import('./mcp-target.js'),
          import('../services/governance/index.js'),
          import('../services/domains.js'),
          import('../mcp/tool-sets.js'),
        ]);
      // A bad tool list is refused before the service starts: exit 2, naming what selects nothing.
      const allTools = domainTools();
      const { value: toolValue, source: toolSource } = toolSetting(toolList);
      let tools: Tool[];
      try {
        tools = selectTools(toolValue, allTools, toolProfiles(allTools, domainToolSets()), toolSource);
      } catch (err) {
        if (err instanceof ToolSetError) return fail(err.message);
        throw err;
      }
      const logger = createLogger(config.logLevel, undefined, config.logFormat);
      let target: McpTarget;
      try {
        target = await openMcpTarget(config, logger, typeof serverUrl === 'string' ? serverUrl : process.env.SANDBOXD_URL || process.env.SERVICE_URL || undefined);
      } catch (err) {
        if (err instanceof DataDirLockedError || err instanceof McpTargetError || err instanceof SecretKeyError || err instanceof PolicyFileError) return fail(err.message);
        throw err;
      }
      const mcp = await createMcpServer({ api: target.api, logger, tools });
      await mcp.server.connect(new StdioServerTransport());
      logger.info({ target: target.api.target, tools: tools.length }, 'sandboxd mcp ready on stdio');

      let closing = false;
      const shutdown = (reason: string) => {
        if (closing) return;
        closing = true;
        logger.info(`${reason}: shutting down`);
        void mcp
          .close()
          .then(() => target.close())
          .finally(() => process.exit(0));
      };
      // The client closes stdin when it is done with the server.
      process.stdin.once('end', () => shutdown('stdin closed'));
      process.once('SIGINT', () => shutdown('SIGINT'));
      process.once('SIGTERM', () => shutdown('SIGTERM'));
    });
}

/** The `--tools` value and where it came from: the flag, else SANDBOXD_MCP_TOOLS or SERVICE_MCP_TOOLS, else every tool. */
function toolSetting(flag: unknown): { value: string; source: string } {
  if (typeof flag === 'string') return { value: flag, source: '--tools' };
  const name = ['SANDBOXD_MCP_TOOLS', 'SERVICE_MCP_TOOLS'].find((variable) => process.env[variable]);
  return name ? { value: String(process.env[name]), source: name } : { value: 'full', source: '--tools' };
}
