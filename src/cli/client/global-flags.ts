import { UsageError } from './output.js';
import type { GlobalFlags } from './connection.js';

/** The commands that talk to a server and take the global flags anywhere before `--`, by name and alias. */
export const CLIENT_COMMANDS = [
  'sandbox',
  'exec',
  'run',
  'cp',
  'shell',
  'logs',
  'events',
  'snapshot',
  'volume',
  'volumes',
  'ports',
  'port',
  'images',
  'image',
  'object',
  'objects',
  'schedule',
  'schedules',
  'store',
  'stores',
  'orchestration',
  'orchestrations',
  'policy',
  'permission',
  'permissions',
  'llm',
  '__complete',
] as const;

const WITH_VALUE = new Set(['--server', '--api-key']);

/**
 * Takes the global flags (`--server URL`, `--api-key KEY`, `--json`, each also as `--flag=value`)
 * out of the arguments of a client command, wherever they stand before `--`, as kubectl does;
 * `sandboxd --json sandbox ls` and `sandboxd sandbox ls --json` are the same. Arguments of
 * other commands (`serve`, `mcp`: their `--api-key` means something else) and
 * everything after `--` (the command of `exec` and `run`) are left alone; `client` is false then.
 */
export function extractGlobalFlags(given: string[]): { args: string[]; flags: GlobalFlags; client: boolean } {
  const flags: GlobalFlags = { json: false };
  if (!isClientCommand(given)) return { args: given, flags, client: false };
  const args = endOptionsAtCommand(given);
  const rest: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === undefined) break;
    if (arg === '--') {
      rest.push(...args.slice(i));
      break;
    }
    const [name, inline] = arg.startsWith('--') && arg.includes('=') ? [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)] : [arg, undefined];
    if (name === '--json') {
      if (inline !== undefined) throw new UsageError('--json takes no value');
      flags.json = true;
    } else if (WITH_VALUE.has(name)) {
      const value = inline ?? args[++i];
      if (value === undefined || value === '' || (inline === undefined && value.startsWith('-'))) throw new UsageError(`${name} needs a value`);
      if (name === '--server') flags.server = value;
      else flags.apiKey = value;
    } else {
      rest.push(arg);
    }
  }
  return { args: rest, flags, client: true };
}

/**
 * Where the command of `exec` and `run` starts, those commands' positional words before it, and
 * their options that take a value (the word after such an option is its value, not a command).
 */
export const COMMAND_STARTS: Record<string, { after: number; withValue: ReadonlySet<string> }> = {
  exec: { after: 1, withValue: new Set(['--workdir', '--env', '--timeout']) },
  run: { after: 0, withValue: new Set(['--image', '--profile', '--workdir', '--env', '--timeout']) },
};

/**
 * `sandboxd exec NAME ls -la` as `sandboxd exec NAME -- ls -la`, and `sandboxd run python3 -c x`
 * as `sandboxd run -- python3 -c x`: options end at the command's first word, as in `docker
 * exec` and `kubectl exec`, so the command's own options are never taken for sandboxd's. An
 * explicit `--` is kept as it is.
 */
export function endOptionsAtCommand(args: string[]): string[] {
  let subcommand: (typeof COMMAND_STARTS)[string] | undefined;
  let positionals = 0;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === undefined || arg === '--') return args;
    if (arg.startsWith('-') && arg !== '-') {
      if ((WITH_VALUE.has(arg) || subcommand?.withValue.has(arg)) && !arg.includes('=')) i++;
      continue;
    }
    if (!subcommand) {
      subcommand = COMMAND_STARTS[arg];
      if (!subcommand) return args;
      continue;
    }
    if (positionals === subcommand.after) return [...args.slice(0, i), '--', ...args.slice(i)];
    positionals++;
  }
  return args;
}

/** Whether the first command word (past any global flags) names a client command. */
function isClientCommand(args: string[]): boolean {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === undefined) break;
    if (arg === '--') return false;
    if (WITH_VALUE.has(arg)) {
      i++;
      continue;
    }
    if (arg.startsWith('-')) continue;
    return (CLIENT_COMMANDS as readonly string[]).includes(arg);
  }
  return false;
}
