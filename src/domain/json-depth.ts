/**
 * The deepest nesting of arrays and objects sandboxd takes in JSON: in request bodies, and in
 * what comes back from places it does not control (a sandbox's object worker or command, a
 * database's JSON value, a webhook). Far beyond any value the API needs (an orchestration's
 * steps nest a few levels), and far below what would exhaust the stack of a recursive walk
 * (validation, serialisation, JSON.stringify overflow between 3,000 and 5,000 levels).
 */
export const MAX_JSON_DEPTH = 64;

/** What a value nested past MAX_JSON_DEPTH is told: "nested deeper than 64 levels ...". */
export const TOO_DEEP = `nested deeper than ${MAX_JSON_DEPTH} levels of arrays and objects`;

/**
 * Whether JSON text nests arrays and objects deeper than `max`: one pass over the characters,
 * outside strings, before the text is parsed. Text that is not JSON is left to the parser.
 */
export function textDeeperThan(text: string, max = MAX_JSON_DEPTH): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i += 1) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i += 1; // a backslash escapes the next character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      depth += 1;
      if (depth > max) return true;
    } else if (c === 0x5d || c === 0x7d) depth -= 1;
  }
  return false;
}
