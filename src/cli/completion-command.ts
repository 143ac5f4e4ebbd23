import { Command } from 'commander';
import type { SandboxSummary } from '../schemas/sandbox-schemas.js';
import type { SnapshotView } from '../schemas/snapshot-schemas.js';
import type { ClientContext } from './client/client-context.js';
import { reportFailure, UsageError } from './client/output.js';

const GLOBAL_FLAGS = ['--server', '--api-key', '--json'];

/** Commands whose first argument is a sandbox name (path from the program, space-separated). */
const TAKES_SANDBOX = new Set(['sandbox get', 'sandbox rm', 'sandbox start', 'sandbox stop', 'sandbox recover', 'exec', 'shell', 'logs', 'snapshot take', 'ports url', 'llm usage']);
/** Commands whose first argument is a snapshot name. */
const TAKES_SNAPSHOT = new Set(['snapshot get', 'snapshot restore', 'snapshot rm']);

const BASH = `# sandboxd completion for bash: source <(sandboxd completion bash)
_sandboxd() {
  local IFS=$'\\n'
  COMPREPLY=($(sandboxd __complete "\${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null))
  [[ \${#COMPREPLY[@]} -eq 1 && \${COMPREPLY[0]} == *: ]] && compopt -o nospace 2>/dev/null
}
complete -o default -F _sandboxd sandboxd
`;

const ZSH = `#compdef sandboxd
# sandboxd completion for zsh: source <(sandboxd completion zsh)
_sandboxd() {
  local -a candidates prefixes
  local ret=1
  candidates=("\${(@f)$(sandboxd __complete "\${(@)words[2,CURRENT]}" 2>/dev/null)}")
  candidates=(\${candidates:#})
  (( \${#candidates} )) || { _files; return }
  # NAME: of cp goes on without a space; everything else ends the word.
  prefixes=(\${(M)candidates:#*:})
  candidates=(\${candidates:#*:})
  (( \${#prefixes} )) && compadd -S '' -- "\${prefixes[@]}" && ret=0
  (( \${#candidates} )) && compadd -- "\${candidates[@]}" && ret=0
  return ret
}
compdef _sandboxd sandboxd
`;

/**
 * `sandboxd completion bash|zsh` prints a script that the shell sources; it asks the hidden
 * `sandboxd __complete WORDS...` for the candidates of the last word: command words and flags
 * from the command tree, sandbox and snapshot names from the server (nothing when it is out of reach).
 */
export function completionCommands(program: Command, ctx: ClientContext): [Command, Command] {
  const completion = new Command('completion')
    .description('print a shell completion script: source <(sandboxd completion bash)')
    .argument('<shell>', 'bash or zsh')
    .action((shell: string) => {
      if (shell === 'bash') process.stdout.write(BASH);
      else if (shell === 'zsh') process.stdout.write(ZSH);
      else reportFailure(new UsageError(`completion: unknown shell '${shell}' (bash or zsh)`));
    });

  const complete = new Command('__complete')
    .argument('[words...]')
    .allowUnknownOption()
    .helpOption(false)
    .action(async (words: string[]) => {
      for (const candidate of await candidates(program, ctx, words)) process.stdout.write(`${candidate}\n`);
    });
  return [completion, complete];
}

async function candidates(program: Command, ctx: ClientContext, words: string[]): Promise<string[]> {
  const current = words.at(-1) ?? '';
  let command = program;
  const path: string[] = [];
  const operands: string[] = [];
  for (const word of words.slice(0, -1)) {
    if (word.startsWith('-')) continue;
    const sub = command.commands.find((c) => c.name() === word || c.aliases().includes(word));
    if (sub && operands.length === 0) {
      command = sub;
      path.push(sub.name());
    } else operands.push(word);
  }
  const matching = (list: string[]) => list.filter((item) => item.startsWith(current));
  if (current.startsWith('-')) {
    const flags = command.options.map((o) => o.long).filter((f): f is string => Boolean(f));
    return matching([...flags, ...(command === program ? [] : GLOBAL_FLAGS)]);
  }
  const subcommands = command.commands.filter((c) => !c.name().startsWith('_')).map((c) => c.name());
  if (subcommands.length) return matching(subcommands);
  const key = path.join(' ');
  const first = operands.length === 0;
  try {
    if ((TAKES_SANDBOX.has(key) && first) || (key === 'sandbox rm')) return matching(await sandboxNames(ctx));
    if (TAKES_SNAPSHOT.has(key) && (first || key === 'snapshot rm')) {
      const list = await ctx.connection().api.request<SnapshotView[]>({ method: 'GET', path: '/snapshots' });
      return matching(list.map((s) => s.name));
    }
    // cp: a sandbox path starts with NAME:, offered while the word has no colon or slash yet.
    if (key === 'cp' && !current.includes(':') && !current.includes('/') && !current.startsWith('.')) {
      return matching((await sandboxNames(ctx)).map((name) => `${name}:`));
    }
  } catch {
    // the server is out of reach: no names, and the shell falls back to files
  }
  return [];
}

async function sandboxNames(ctx: ClientContext): Promise<string[]> {
  const list = await ctx.connection().api.request<SandboxSummary[]>({ method: 'GET', path: '/sandboxes' });
  return list.map((s) => s.name);
}
