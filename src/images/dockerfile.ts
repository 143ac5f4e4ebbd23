import { expandWord, splitWords, WordError } from './dockerfile-words.js';

/**
 * What a Dockerfile may make the engine fetch, read as the engine reads it (the parser BuildKit
 * and the classic builder share): parser directives at the top (the `escape` character), line
 * continuations with that character (comment and empty lines inside them skipped), comments,
 * instructions in any case, their `--flags`, and the meta `ARG`s a `FROM` is expanded with.
 *
 * Builds here fetch nothing: every image a build reads (`FROM`, `COPY --from`, `RUN
 * --mount=from=`) must be `scratch`, an earlier stage, or an image present on the engine (the
 * caller checks those); everything that would make the engine reach a network is refused with
 * the line it is on (`DockerfileError`): `ADD` of a URL or a git repository, `--platform`, `RUN
 * --network`/`--security`, heredocs (which the engine's classic builder reads as instructions,
 * so no reading of them is safe), an `escape` directive after another directive (engines differ
 * on it), and a reference that cannot be read without running the build.
 */

export class DockerfileError extends Error {
  override readonly name = 'DockerfileError';
  constructor(
    readonly line: number,
    message: string,
  ) {
    super(`line ${line}: ${message}`);
  }
}

/** An image a build reads, by the line and instruction that name it. */
export interface DockerfileImage {
  line: number;
  /** How the Dockerfile names it: `FROM x`, `COPY --from=x`, `RUN --mount=from=x`. */
  instruction: string;
  /** The reference, build arguments expanded. */
  image: string;
}

/** One instruction: its first and last line, keyword (upper case) and the rest, continuations joined. */
export interface Instruction {
  line: number;
  end?: number;
  keyword: string;
  rest: string;
}

const DIRECTIVE = /^#\s*([a-zA-Z][a-zA-Z0-9]*)\s*=\s*(.*?)\s*$/;
const HEREDOC = /(^|\s)<<-?\s*(["']?)[A-Za-z_][A-Za-z0-9_]*\2/;
const REMOTE_SOURCE = /^(?:[a-z][a-z0-9+.-]*:\/\/|git@|github\.com\/)/i;

/** The escape character and the instructions of a Dockerfile, as the engine splits them. */
export function instructions(text: string): { escape: string; list: Instruction[] } {
  const lines = text.replace(/^\uFEFF/, '').split('\n').map((line) => line.replace(/\r$/, ''));
  let escape = '\\';
  let index = 0;
  // Parser directives: only at the very top; the first other line (also an empty one) ends them.
  let otherDirective = false;
  let escapeSeen = false;
  for (; index < lines.length; index++) {
    const match = DIRECTIVE.exec((lines[index] as string).trimStart());
    if (!match) break;
    const [, name = '', value = ''] = match;
    if (name.toLowerCase() === 'escape') {
      if (escapeSeen) throw new DockerfileError(index + 1, 'only one escape parser directive can be used');
      if (otherDirective) throw new DockerfileError(index + 1, 'the escape directive must be the first line: engine versions differ on one after another directive');
      if (value !== '\\' && value !== '`') throw new DockerfileError(index + 1, `invalid escape character '${value}': must be \` or \\`);
      escape = value;
      escapeSeen = true;
    } else otherDirective = true;
  }
  const continuation = new RegExp(`${escape === '\\' ? '\\\\' : '`'}[ \\t]*$`);
  const comment = (line: string) => /^\s*#/.test(line);
  const list: Instruction[] = [];
  for (; index < lines.length; index++) {
    const first = (lines[index] as string).trimStart();
    if (first === '' || comment(first)) continue;
    const start = index + 1;
    let joined = first;
    while (continuation.test(joined)) {
      joined = joined.replace(continuation, '');
      // A continued instruction skips comment and empty lines; the file's end ends it.
      let next: string | undefined;
      while (++index < lines.length) {
        const line = lines[index] as string;
        if (comment(line) || line.trim() === '') continue;
        next = line;
        break;
      }
      if (next === undefined) break;
      joined += next;
    }
    const keyword = /^\S+/.exec(joined)?.[0] ?? '';
    list.push({ line: start, end: Math.min(index + 1, lines.length), keyword: keyword.toUpperCase(), rest: joined.slice(keyword.length).trim() });
  }
  return { escape, list };
}

/** Leading `--name[=value]` flags of an instruction's arguments (quotes in a value kept together). */
export function flagsOf(rest: string): { flags: Array<{ name: string; value: string | undefined }>; args: string } {
  const flags: Array<{ name: string; value: string | undefined }> = [];
  let text = rest;
  for (;;) {
    const match = /^--([A-Za-z][A-Za-z0-9-]*)(?:=((?:"[^"]*"|'[^']*'|[^\s"'])*))?(?=\s|$)\s*/.exec(text);
    if (!match) break;
    flags.push({ name: (match[1] as string).toLowerCase(), value: match[2] });
    text = text.slice(match[0].length);
  }
  return { flags, args: text };
}

const unquote = (value: string) => value.replace(/^(["'])(.*)\1$/, '$2');

/** The `key=value` fields of a `--mount` value (CSV), keys in lower case. */
function mountFields(value: string): Map<string, string> {
  const fields = new Map<string, string>();
  for (const field of unquote(value).split(',')) {
    const eq = field.indexOf('=');
    fields.set((eq < 0 ? field : field.slice(0, eq)).trim().toLowerCase(), eq < 0 ? '' : unquote(field.slice(eq + 1).trim()));
  }
  return fields;
}

/**
 * Reads a Dockerfile: the images it reads that are neither `scratch` nor an earlier stage, each
 * with its line, in order; a `DockerfileError` naming the line of anything that would fetch.
 */
export function dockerfileImages(text: string): DockerfileImage[] {
  const { escape, list } = instructions(text);
  const metaArgs = new Map<string, string>();
  // Stages finished before the current one: the engine knows a stage's name only after its end.
  const stages: string[] = [];
  let current: string | undefined;
  const images: DockerfileImage[] = [];
  let stageCount = 0;
  /** `name` is an earlier stage (by name, or by index for `--from`): nothing to look up. */
  const earlier = (name: string, flag: boolean) => stages.includes(name.toLowerCase()) || (flag && /^\d+$/.test(name) && Number(name) < stages.length);
  const named = (line: number, instruction: string, raw: string) => {
    const image = unquote(raw);
    if (image.includes('$')) throw new DockerfileError(line, `${instruction}: name the stage or image itself: a build argument there cannot be checked`);
    if (!earlier(image, true)) images.push({ line, instruction, image });
  };
  const check = (instruction: Instruction, trigger: boolean) => {
    const { line, keyword, rest } = instruction;
    const { flags, args } = flagsOf(rest);
    if (['RUN', 'COPY', 'ADD'].includes(keyword) && HEREDOC.test(args)) {
      throw new DockerfileError(line, `${keyword} with a heredoc (<<): the engine's classic builder reads its lines as instructions; put the text in a file of the context`);
    }
    if (stageCount === 0 && !trigger && keyword !== 'FROM' && keyword !== 'ARG') {
      throw new DockerfileError(line, `${keyword}: a Dockerfile starts with FROM (or ARG before it)`);
    }
    switch (keyword) {
      case 'FROM': {
        if (trigger) throw new DockerfileError(line, 'ONBUILD FROM is not allowed');
        if (flags.length > 0) throw new DockerfileError(line, `FROM --${flags[0]?.name}: FROM takes no flags here (builds use the engine's own platform and pull nothing)`);
        const [reference = '', as, stage, ...extra] = args.split(/\s+/);
        if (extra.length > 0 || (as !== undefined && (as.toUpperCase() !== 'AS' || !stage))) throw new DockerfileError(line, `FROM ${args}: expected FROM image [AS name]`);
        const image = expandWord(reference, metaArgs, escape);
        if (image === '') throw new DockerfileError(line, `FROM ${reference}: names no image (a build argument without a value)`);
        if (stageCount > 0) stages.push(current ?? `\u0000${stageCount}`);
        if (image.toLowerCase() !== 'scratch' && !earlier(image, false)) images.push({ line, instruction: `FROM ${image}`, image });
        stageCount += 1;
        current = stage?.toLowerCase();
        break;
      }
      case 'ARG':
        if (stageCount === 0 && !trigger) {
          for (const word of splitWords(args, metaArgs, escape)) {
            const eq = word.indexOf('=');
            // `ARG NAME` without a value leaves it unset (empty when expanded), as no build-arg is given.
            if (eq > 0) metaArgs.set(word.slice(0, eq), word.slice(eq + 1));
          }
        }
        break;
      case 'COPY':
      case 'ADD':
        for (const flag of flags) {
          if (flag.name !== 'from') continue;
          if (flag.value === undefined || flag.value === '') throw new DockerfileError(line, `${keyword} --from: names nothing`);
          if (trigger) throw new DockerfileError(line, `ONBUILD ${keyword} --from: a later build would read ${flag.value} from wherever it is`);
          named(line, `${keyword} --from=${unquote(flag.value)}`, flag.value);
        }
        if (keyword === 'ADD') {
          if (args.includes('$')) throw new DockerfileError(line, 'ADD with a variable: its sources cannot be checked (builds fetch nothing); use COPY, or name the files');
          const remote = addSources(line, args, escape).find((source) => REMOTE_SOURCE.test(source));
          if (remote) throw new DockerfileError(line, `ADD ${remote}: builds fetch nothing: put the file in the context and COPY it`);
        }
        break;
      case 'RUN':
        for (const flag of flags) {
          if (flag.name === 'network' || flag.name === 'security') throw new DockerfileError(line, `RUN --${flag.name}: build steps run with no network and no privileges`);
          if (flag.name !== 'mount') continue;
          const from = mountFields(flag.value ?? '').get('from');
          if (from === undefined) continue;
          if (trigger) throw new DockerfileError(line, `ONBUILD RUN --mount=from=${from}: a later build would read it from wherever it is`);
          named(line, `RUN --mount=from=${from}`, from);
        }
        break;
      case 'ONBUILD': {
        if (trigger) throw new DockerfileError(line, 'ONBUILD ONBUILD is not allowed');
        const inner = /^(\S+)\s*([\s\S]*)$/.exec(args);
        if (inner) check({ line, keyword: (inner[1] as string).toUpperCase(), rest: inner[2] as string }, true);
        break;
      }
    }
  };
  for (const instruction of list) {
    try {
      check(instruction, false);
    } catch (err) {
      if (err instanceof WordError) throw new DockerfileError(instruction.line, `${instruction.keyword}: ${err.message}`);
      throw err;
    }
  }
  if (stageCount === 0) throw new DockerfileError(list.at(-1)?.line ?? 1, 'no FROM: a Dockerfile builds from an image');
  return images;
}

/**
 * The Dockerfile with `LABEL key="value"` after each `FROM`, so that every image and container
 * of each stage's steps carries the labels (the engine's `labels` option marks the last image
 * only). Values must hold no quote, `$` or escape character.
 */
export function labelStages(text: string, labels: Record<string, string>): string {
  const label = `LABEL ${Object.entries(labels)
    .map(([key, value]) => `${key}="${value}"`)
    .join(' ')}`;
  const after = new Set(instructions(text).list.filter((i) => i.keyword === 'FROM').map((i) => i.end ?? i.line));
  const lines = text.replace(/^\uFEFF/, '').split('\n');
  return lines.flatMap((line, i) => (after.has(i + 1) ? [line, label] : [line])).join('\n');
}

/**
 * Why an `ONBUILD` trigger of a base image would fetch (it runs in the build FROM it), or
 * undefined: the same reading as the Dockerfile's own ONBUILD.
 */
export function triggerProblem(trigger: string): string | undefined {
  try {
    dockerfileImages(`FROM scratch\nONBUILD ${trigger.replace(/\n/g, ' ')}\n`);
    return undefined;
  } catch (err) {
    if (err instanceof DockerfileError) return err.message.replace(/^line \d+: /, '');
    throw err;
  }
}

/** The sources of `ADD` (all its words but the destination), as the engine reads them: JSON form, or words. */
function addSources(line: number, args: string, escape: string): string[] {
  if (args.startsWith('[')) {
    try {
      const parsed = JSON.parse(args) as unknown;
      if (Array.isArray(parsed) && parsed.every((item) => typeof item === 'string')) return parsed.slice(0, -1);
    } catch {
      // Not JSON: the engine reads it as words, as below.
    }
  }
  try {
    return splitWords(args, new Map(), escape).slice(0, -1);
  } catch (err) {
    if (err instanceof WordError) throw new DockerfileError(line, `ADD: ${err.message}`);
    throw err;
  }
}
