import { Command } from 'commander';
import { VERSION } from '../paths.js';
import type { ClientContext } from './client/client-context.js';
import { completionCommands } from './completion-command.js';
import { cpCommand } from './cp-command.js';
import { dataCommands } from './data-command.js';
import { execCommands } from './exec-command.js';
import { imagesCommand } from './images-command.js';
import { llmCommand } from './llm-command.js';
import { mcpCommand } from './mcp-command.js';
import { objectCommand } from './object-command.js';
import { observeCommands } from './observe-command.js';
import { orchestrationCommand } from './orchestration-command.js';
import { permissionCommand, policyCommand } from './policy-command.js';
import { portsCommand } from './ports-command.js';
import { sandboxCommand } from './sandbox-command.js';
import { scheduleCommand } from './schedule-command.js';
import { serveCommand } from './serve-command.js';
import { shellCommand } from './shell-command.js';
import { snapshotCommand } from './snapshot-command.js';
import { storeCommand } from './store-command.js';
import { suggestionFor } from './suggestions.js';
import { volumeCommand } from './volume-command.js';

/**
 * The whole command tree of `sandboxd`: the server (`serve`, `mcp`) and the client commands,
 * each a resource of the API. Usage errors (unknown command or option, a missing argument)
 * throw a CommanderError for main.ts to turn into exit code 2; help and --version exit 0.
 */
export function cliProgram(ctx: ClientContext): Command {
  const program = new Command('sandboxd')
    .description('isolated sandboxes for untrusted commands: HTTP/JSON API, MCP tool server, CLI')
    .version(VERSION)
    .addHelpText(
      'after',
      '\nThe client commands (all but serve, mcp, migrate, backup, restore and completion) take these anywhere before `--`:\n' +
        '  --server <url>    the server (default SANDBOXD_URL or SERVICE_URL, else the local server of <data-dir>/server.json, else http://127.0.0.1:18888)\n' +
        '  --api-key <key>   its API key (default SANDBOXD_API_KEY or SERVICE_API_KEY)\n' +
        "  --json            print the API's data as JSON",
    );
  program.addCommand(serveCommand());
  program.addCommand(mcpCommand());
  for (const command of dataCommands()) program.addCommand(command);
  for (const command of [
    sandboxCommand(ctx),
    ...execCommands(ctx),
    cpCommand(ctx),
    shellCommand(ctx),
    ...observeCommands(ctx),
    snapshotCommand(ctx),
    volumeCommand(ctx),
    portsCommand(ctx),
    imagesCommand(ctx),
    objectCommand(ctx),
    scheduleCommand(ctx),
    storeCommand(ctx),
    orchestrationCommand(ctx),
    policyCommand(ctx),
    permissionCommand(ctx),
    llmCommand(ctx),
  ]) {
    program.addCommand(command);
  }
  const [completion, complete] = completionCommands(program, ctx);
  program.addCommand(completion);
  program.addCommand(complete, { hidden: true });

  for (const command of everyCommand(program)) {
    command.exitOverride();
    // Usage errors say what to type instead: the closest command, sandboxd's name for a flag.
    command.configureOutput({
      outputError: (text, write) => {
        const commands = command.commands.map((sub) => sub.name()).filter((name) => !name.startsWith('__'));
        const hint = suggestionFor(text, commands);
        write(hint ? `${text.trimEnd()}\n${hint}\n` : text);
      },
    });
  }
  return program;
}

/** A command and every command under it. */
export const everyCommand = (command: Command): Command[] => [command, ...command.commands.flatMap(everyCommand)];
