/**
 * Words of a Dockerfile as the engine's shell lexer reads them (BuildKit's `shell.Lex`, which the
 * classic builder uses too): quotes, the escape character, and `$VAR`, `${VAR}`, `${VAR:-word}`,
 * `${VAR-word}`, `${VAR:+word}`, `${VAR+word}` expanded from a map of build arguments. Any other
 * `${...}` form is refused (`WordError`) rather than guessed.
 */

export class WordError extends Error {
  override readonly name = 'WordError';
}

const NAME = /^[A-Za-z_][A-Za-z0-9_]*/;

/**
 * Expands one word (quotes removed, escapes applied, variables replaced); unset variables are
 * empty, as in the engine.
 */
export function expandWord(word: string, args: ReadonlyMap<string, string>, escape: string): string {
  return expandWords(word, args, escape, false)[0] ?? '';
}

/** Splits `text` on unquoted blanks and expands each word (an ARG line: `ARG A=1 B="x y"`). */
export function splitWords(text: string, args: ReadonlyMap<string, string>, escape: string): string[] {
  return expandWords(text, args, escape, true);
}

function expandWords(text: string, args: ReadonlyMap<string, string>, escape: string, split: boolean): string[] {
  const words: string[] = [];
  let word = '';
  let inWord = false;
  let i = 0;
  const variable = (): string => {
    // At a `$`: the variable's value, `i` past it.
    i += 1;
    if (text[i] === '{') {
      const close = closing(text, i, escape);
      const inner = text.slice(i + 1, close);
      i = close + 1;
      const name = NAME.exec(inner)?.[0];
      if (!name) throw new WordError(`\${${inner}}: not a variable this build can read`);
      const rest = inner.slice(name.length);
      const value = args.get(name);
      if (rest === '') return value ?? '';
      const modifier = /^(:?[-+])([\s\S]*)$/.exec(rest);
      if (!modifier) throw new WordError(`\${${inner}}: only \${VAR}, \${VAR:-word} and \${VAR:+word} can be checked`);
      const [, op, alternative = ''] = modifier;
      const set = op?.startsWith(':') ? value !== undefined && value !== '' : value !== undefined;
      const other = expandWord(alternative, args, escape);
      return op?.endsWith('-') ? (set ? (value ?? '') : other) : set ? other : '';
    }
    const name = NAME.exec(text.slice(i))?.[0];
    if (!name) return '$';
    i += name.length;
    return args.get(name) ?? '';
  };
  while (i < text.length) {
    const ch = text[i] as string;
    if (split && /\s/.test(ch)) {
      if (inWord) words.push(word);
      word = '';
      inWord = false;
      i += 1;
      continue;
    }
    inWord = true;
    if (ch === escape) {
      if (i + 1 < text.length) word += text[i + 1];
      i += 2;
    } else if (ch === "'") {
      const end = text.indexOf("'", i + 1);
      if (end < 0) throw new WordError(`unmatched ' in ${text}`);
      word += text.slice(i + 1, end);
      i = end + 1;
    } else if (ch === '"') {
      i += 1;
      for (;;) {
        if (i >= text.length) throw new WordError(`unmatched " in ${text}`);
        const c = text[i] as string;
        if (c === '"') break;
        if (c === escape && i + 1 < text.length && /["$`\\]/.test(text[i + 1] as string)) {
          word += text[i + 1];
          i += 2;
        } else if (c === '$') word += variable();
        else {
          word += c;
          i += 1;
        }
      }
      i += 1;
    } else if (ch === '$') word += variable();
    else {
      word += ch;
      i += 1;
    }
  }
  if (inWord || !split) words.push(word);
  return words;
}

/** The index of the `}` closing the `{` at `open`, nested braces and escapes counted. */
function closing(text: string, open: number, escape: string): number {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    if (text[i] === escape) i += 1;
    else if (text[i] === '{') depth += 1;
    else if (text[i] === '}' && --depth === 0) return i;
  }
  throw new WordError(`unmatched { in ${text}`);
}
