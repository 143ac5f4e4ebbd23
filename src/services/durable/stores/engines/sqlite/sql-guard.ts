/**
 * What a sqlite store refuses before any SQL reaches an engine (docs/decisions.md, "sqlite
 * stores"). Read-only enforcement is the engine's (a read-only connection); this file only keeps
 * statements away from the host's files: ATTACH, DETACH and VACUUM INTO would open or write any
 * file the server can reach (its own `sandboxd.db` included), and PRAGMA is limited to an
 * allow-list. It also refuses transaction control, which would leave a cached connection inside
 * a transaction the store did not open.
 *
 * The check reads tokens the way SQLite's tokenizer does (comments, quoted identifiers in
 * "", [], ``, strings, blobs), so comments, quoting, case and `EXPLAIN` cannot hide a keyword;
 * ATTACH and DETACH are refused wherever they stand as bare words, VACUUM with INTO too. It
 * judges every `;`-separated part, although the engines run one statement per string.
 */
import { badRequest } from '../../../../../errors.js';

/** Pragmas a host store may run, as `PRAGMA x` and as `pragma_x` table-valued functions. */
export const ALLOWED_PRAGMAS = [
  'table_info',
  'table_list',
  'index_list',
  'index_info',
  'foreign_key_list',
  'user_version',
  'foreign_keys',
  'journal_mode',
] as const;

/** Allowed pragmas that may be read but not set (a connection setting, or the file's journal). */
const READ_ONLY_PRAGMAS = new Set(['foreign_keys', 'journal_mode']);

/** Allowed pragmas that hold a value (the others take an argument in parentheses). */
const SETTINGS = new Set(['user_version', 'foreign_keys', 'journal_mode']);

/** Statements the store runs itself (`transaction`), never a client. */
const TRANSACTION_CONTROL = new Set(['BEGIN', 'COMMIT', 'END', 'ROLLBACK', 'SAVEPOINT', 'RELEASE']);

type TokenKind = 'word' | 'ident' | 'string' | 'other';

interface Token {
  kind: TokenKind;
  /** As written; an identifier or a string without its quotes. */
  text: string;
}

/** What the store needs to know of a statement. */
export interface StatementShape {
  /** The statement's first keyword after EXPLAIN [QUERY PLAN] and a WITH clause, upper-cased. */
  verb: string;
  /** An allowed PRAGMA that only reads (it may run through a read-only connection). */
  pragmaRead: boolean;
}

// SQLite's whitespace: space, \t, \n, \f, \r (not \v, which its tokenizer calls illegal).
const isSpace = (c: string) => c === ' ' || c === '\t' || c === '\n' || c === '\f' || c === '\r';
// Identifier characters: ASCII letters, digits, `_`, `$` and every character beyond ASCII.
const isIdChar = (c: string) => /[A-Za-z0-9_$]/.test(c) || c.charCodeAt(0) > 0x7f;
const isIdStart = (c: string) => /[A-Za-z_]/.test(c) || c.charCodeAt(0) > 0x7f;

/** The tokens of `sql` without whitespace and comments. */
function tokenize(sql: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  const quoted = (close: string): string => {
    // From after the opening quote to its close; a doubled close quote stands for itself.
    let text = '';
    for (i += 1; i < sql.length; i += 1) {
      if (sql[i] === close) {
        if (close !== ']' && sql[i + 1] === close) {
          text += close;
          i += 1;
          continue;
        }
        i += 1;
        return text;
      }
      text += sql[i];
    }
    return text;
  };
  while (i < sql.length) {
    const c = sql.charAt(i);
    if (isSpace(c)) {
      i += 1;
    } else if (c === '-' && sql[i + 1] === '-') {
      const end = sql.indexOf('\n', i);
      i = end === -1 ? sql.length : end + 1;
    } else if (c === '/' && sql[i + 1] === '*') {
      const end = sql.indexOf('*/', i + 2);
      i = end === -1 ? sql.length : end + 2;
    } else if ((c === 'x' || c === 'X') && sql[i + 1] === "'") {
      i += 1;
      tokens.push({ kind: 'other', text: quoted("'") });
    } else if (c === "'") {
      tokens.push({ kind: 'string', text: quoted("'") });
    } else if (c === '"' || c === '`') {
      tokens.push({ kind: 'ident', text: quoted(c) });
    } else if (c === '[') {
      tokens.push({ kind: 'ident', text: quoted(']') });
    } else if (isIdStart(c)) {
      const start = i;
      while (i < sql.length && isIdChar(sql.charAt(i))) i += 1;
      tokens.push({ kind: 'word', text: sql.slice(start, i) });
    } else if (/[0-9]/.test(c) || (c === '.' && /[0-9]/.test(sql[i + 1] ?? ''))) {
      const start = i;
      while (i < sql.length && /[0-9A-Za-z_.]/.test(sql.charAt(i))) i += 1;
      tokens.push({ kind: 'other', text: sql.slice(start, i) });
    } else if (c === '?' || c === ':' || c === '@' || c === '$') {
      const start = i;
      i += 1;
      while (i < sql.length && isIdChar(sql.charAt(i))) i += 1;
      tokens.push({ kind: 'other', text: sql.slice(start, i) });
    } else {
      tokens.push({ kind: 'other', text: c });
      i += 1;
    }
  }
  return tokens;
}

/** Splits at every `;` (also those inside a trigger's body, which only makes more parts to judge). */
function statements(tokens: Token[]): Token[][] {
  const parts: Token[][] = [];
  let part: Token[] = [];
  for (const token of tokens) {
    if (token.kind !== 'other' || token.text !== ';') part.push(token);
    else {
      parts.push(part);
      part = [];
    }
  }
  parts.push(part);
  return parts.filter((each) => each.length > 0);
}

const isWord = (token: Token | undefined, word: string) => token?.kind === 'word' && token.text.toUpperCase() === word;
const isPunct = (token: Token | undefined, text: string) => token?.kind === 'other' && token.text === text;

/** The index after the parenthesised group that opens at `at`; the end when it never closes. */
function skipGroup(tokens: Token[], at: number): number {
  let depth = 0;
  for (let i = at; i < tokens.length; i += 1) {
    if (isPunct(tokens[i], '(')) depth += 1;
    else if (isPunct(tokens[i], ')') && --depth === 0) return i + 1;
  }
  return tokens.length;
}

/** The index of the verb: after punctuation, `EXPLAIN [QUERY PLAN]` and `WITH [RECURSIVE] name AS (...), ...`. */
function verbIndex(tokens: Token[]): number {
  let i = 0;
  const skipPunct = () => {
    while (tokens[i]?.kind === 'other') i += 1;
  };
  skipPunct();
  if (isWord(tokens[i], 'EXPLAIN')) {
    i += 1;
    if (isWord(tokens[i], 'QUERY') && isWord(tokens[i + 1], 'PLAN')) i += 2;
    skipPunct();
  }
  if (!isWord(tokens[i], 'WITH')) return i;
  i += 1;
  if (isWord(tokens[i], 'RECURSIVE')) i += 1;
  for (;;) {
    i += 1; // the table's name
    if (isPunct(tokens[i], '(')) i = skipGroup(tokens, i);
    if (isWord(tokens[i], 'AS')) i += 1;
    if (isWord(tokens[i], 'NOT')) i += 1;
    if (isWord(tokens[i], 'MATERIALIZED')) i += 1;
    if (isPunct(tokens[i], '(')) i = skipGroup(tokens, i);
    if (!isPunct(tokens[i], ',')) break;
    i += 1;
  }
  skipPunct();
  return i;
}

function verbOf(tokens: Token[]): string {
  const token = tokens[verbIndex(tokens)];
  return token?.kind === 'word' ? token.text.toUpperCase() : '';
}

/**
 * The statement's shape, for any sqlite store: BAD_REQUEST naming `field` for an empty
 * statement, a NUL character or transaction control.
 */
export function statementShape(sql: string, field: string): StatementShape {
  if (sql.includes('\0')) throw badRequest(`${field}: must not contain a NUL character`);
  const parts = statements(tokenize(sql));
  const first = parts[0];
  if (!first) throw badRequest(`${field}: holds no statement`);
  const verb = verbOf(first);
  if (TRANSACTION_CONTROL.has(verb)) {
    throw badRequest(
      `${field}: ${verb} is not allowed: the store opens and ends transactions itself (execute with statements[] and transaction: true runs them in one)`,
    );
  }
  return { verb, pragmaRead: verb === 'PRAGMA' && pragmaOf(first).reads };
}

/** The pragma a `PRAGMA [schema.]name [= value | (value)]` statement names, and whether it only reads. */
function pragmaOf(tokens: Token[]): { name: string; reads: boolean } {
  let i = verbIndex(tokens) + 1;
  if (isPunct(tokens[i + 1], '.')) i += 2;
  const name = (tokens[i]?.text ?? '').toLowerCase();
  const next = tokens[i + 1];
  // `PRAGMA table_info(t)` passes an argument; a setting's value after `=` or in () sets it.
  const sets = isPunct(next, '=') || (isPunct(next, '(') && SETTINGS.has(name));
  return { name, reads: !sets };
}

/**
 * Refuses what would reach the host's files from a store on the host (docs/decisions.md,
 * "sqlite stores"); BAD_REQUEST naming `field`. Call after `statementShape`.
 */
export function checkHostStatement(sql: string, field: string): void {
  const tokens = tokenize(sql);
  for (const token of tokens) {
    // A string counts as well: SQLite takes `FROM 'pragma_database_list'` for an identifier.
    if (token.kind === 'other' || !token.text.toLowerCase().startsWith('pragma_')) continue;
    const name = token.text.toLowerCase().slice('pragma_'.length);
    if (!(ALLOWED_PRAGMAS as readonly string[]).includes(name)) {
      throw badRequest(
        `${field}: ${token.text} is not allowed on a host sqlite store; the pragma functions allowed are ${ALLOWED_PRAGMAS.map((p) => `pragma_${p}`).join(', ')} (bind a value with this text as a parameter)`,
      );
    }
  }
  for (const part of statements(tokens)) {
    // The keywords count anywhere, not only first: no way of writing a statement can move them
    // out of sight. An identifier of that name is written quoted ("attach").
    const keyword = part.find((token) => isWord(token, 'ATTACH') || isWord(token, 'DETACH'));
    if (keyword) {
      throw badRequest(
        `${field}: ${keyword.text.toUpperCase()} is not allowed on a host sqlite store (it would reach other files on the server; quote an identifier of that name)`,
      );
    }
    if (part.some((token) => isWord(token, 'VACUUM')) && part.some((token) => isWord(token, 'INTO'))) {
      throw badRequest(`${field}: VACUUM INTO is not allowed on a host sqlite store (it would write a file on the server)`);
    }
    const verb = verbOf(part);
    if (verb === 'PRAGMA') {
      const { name, reads } = pragmaOf(part);
      if (!(ALLOWED_PRAGMAS as readonly string[]).includes(name)) {
        throw badRequest(`${field}: PRAGMA ${name || '(none)'} is not allowed on a host sqlite store; allowed: ${ALLOWED_PRAGMAS.join(', ')}`);
      }
      if (!reads && READ_ONLY_PRAGMAS.has(name)) throw badRequest(`${field}: PRAGMA ${name} can be read, not set`);
    }
  }
}
