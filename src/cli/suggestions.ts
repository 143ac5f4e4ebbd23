/** Options people bring from other tools, and sandboxd's own name for each. */
const OPTION_TWINS: Record<string, string> = {
  '--url': '--server',
  '--host': '--server',
  '--endpoint': '--server',
  '--token': '--api-key',
  '--key': '--api-key',
};

/** The edit distance of two words (insertions, deletions and substitutions). */
function distance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min((previous[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = row;
  }
  return previous[b.length] ?? 0;
}

/**
 * What to add to one of commander's usage errors so that it says what to type instead: the
 * closest command to an unknown one (commander suggests only near misses), and sandboxd's name
 * for an option another tool spells differently (`--url` is `--server`). Empty when commander
 * already suggested something or there is nothing to say.
 */
export function suggestionFor(message: string, commands: readonly string[]): string {
  if (/Did you mean/i.test(message)) return '';
  const option = /unknown option '([^'=]+)/.exec(message)?.[1];
  if (option && OPTION_TWINS[option]) return `(did you mean ${OPTION_TWINS[option]}?)`;
  const command = /unknown command '([^']+)'/.exec(message)?.[1];
  if (command && commands.length > 0) {
    const [closest] = [...commands].sort((a, b) => distance(command, a) - distance(command, b) || a.localeCompare(b));
    return `(the closest command is '${closest}'; see --help for all of them)`;
  }
  return '';
}
