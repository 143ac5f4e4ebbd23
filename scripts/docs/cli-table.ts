import type { Command } from 'commander';
import { cliProgram } from '../../src/cli/program.js';
import { cell, table } from './markers.js';

/** Commands whose options another page lists. */
const OPTIONS_ELSEWHERE: Record<string, string> = {
  serve: 'every option of [configuration](configuration.md)',
  mcp: 'see [MCP](mcp.md)',
};

/** `<name>`, `[args]`, `<name...>`: a command's arguments as its usage line writes them. */
const argumentsOf = (command: Command) =>
  command.registeredArguments.map((arg) => {
    const name = `${arg.name()}${arg.variadic ? '...' : ''}`;
    return arg.required ? `<${name}>` : `[${name}]`;
  });

/**
 * Every command of `sandboxd` that does something (the groups are their path): its words and
 * aliases, its arguments and options, what it does, read from the command tree itself, so that
 * a new command or flag shows up in docs/cli.md at the next `npm run docs`.
 */
export function cliTable(): string {
  const rows: string[][] = [];
  const walk = (command: Command, path: string[]) => {
    for (const sub of command.commands) {
      if (sub.name().startsWith('_')) continue;
      const words = [...path, sub.name()];
      if (sub.commands.length > 0) {
        walk(sub, words);
        continue;
      }
      const aliases = sub.aliases().length > 0 ? ` (${sub.aliases().join(', ')})` : '';
      const options = OPTIONS_ELSEWHERE[sub.name()] ?? sub.options.map((option) => `\`${option.flags}\``).join(', ');
      const args = argumentsOf(sub).map((arg) => `\`${arg}\``).join(' ');
      rows.push([`\`${words.join(' ')}\`${aliases}`, cell([args, options].filter(Boolean).join(' ')), cell(sub.description())]);
    }
  };
  walk(cliProgram({} as never), []);
  return table(['command', 'arguments and options', 'does'], rows);
}
