import type { Command } from 'commander';
import { action, type ClientContext } from './client-context.js';
import { removeEach } from './output.js';

export interface RemoveCommand {
  /** What it removes, for its help: `delete volumes and their contents`. */
  description: string;
  /** Its argument's help: `volume names`. */
  names: string;
  /** Its argument's name in the usage line (default `name`). */
  argument?: string;
  /** The route that DELETE removes one name at. */
  route: (name: string) => string;
  /** Its name and alias (default `rm`, alias `delete`). */
  verb?: [string, string];
}

/**
 * `PARENT rm NAME...` (alias `delete`): DELETE of each name's route, every name tried, each
 * removed one printed (its name, or `{removed}` with --json); the first failure exits 1 after
 * the others were removed.
 */
export function removeCommand(parent: Command, ctx: ClientContext, { description, names, argument = 'name', route, verb = ['rm', 'delete'] }: RemoveCommand): Command {
  return parent
    .command(verb[0])
    .alias(verb[1])
    .description(description)
    .argument(`<${argument}...>`, names)
    .action(action(async (given: string[]) => removeEach(given, (name) => ctx.connection().api.request({ method: 'DELETE', path: route(name) }), ctx.flags.json)));
}
