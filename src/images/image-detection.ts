import { posix } from 'node:path';
import { DEFAULT_IMAGE } from './catalog.js';

const PYTHON_IMAGE = 'sandboxd/python:bookworm';
const NODE_IMAGE = 'sandboxd/node:bookworm';

/**
 * Which image a run gets from its command alone (the basename of argv[0]), when it names none.
 * `--image-detection` entries are laid over this table.
 */
export const DEFAULT_IMAGE_DETECTION: Readonly<Record<string, string>> = {
  python: PYTHON_IMAGE,
  python3: PYTHON_IMAGE,
  pip: PYTHON_IMAGE,
  pip3: PYTHON_IMAGE,
  node: NODE_IMAGE,
  npm: NODE_IMAGE,
  npx: NODE_IMAGE,
  sh: DEFAULT_IMAGE,
  bash: DEFAULT_IMAGE,
};

/** The image the table gives the command's program, if any; never looks at the server's directory. */
export function detectImage(command: readonly string[], table: Readonly<Record<string, string>>): string | undefined {
  const program = command[0];
  if (!program) return undefined;
  return Object.hasOwn(table, posix.basename(program)) ? table[posix.basename(program)] : undefined;
}

/** `cmd=image,cmd=image` (the environment and flag form of the table). */
export function parseImageDetection(text: string): Record<string, string> {
  const table: Record<string, string> = {};
  for (const entry of text.split(',').map((s) => s.trim()).filter(Boolean)) {
    const [program, image] = entry.split('=').map((s) => s.trim());
    if (!program || !image) throw new Error(`'${entry}' is not program=image`);
    table[program] = image;
  }
  return table;
}
