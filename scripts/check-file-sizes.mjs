#!/usr/bin/env node
// Fails when a source file passes 600 lines (docs/decisions.md, "Code rules").
// Usage: node scripts/check-file-sizes.mjs [max]   (checks src/**/*.ts and agent/**/*.go)
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const MAX = Number(process.argv[2] ?? 600);

/** Source files below `dir` whose names end in one of `endings`. */
function* sources(dir, endings) {
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) yield* sources(path, endings);
    else if (endings.some((ending) => entry.endsWith(ending))) yield path;
  }
}

/** Every file over `max` lines, as `path (n lines)`. */
export function oversized(root = ROOT, max = MAX) {
  const found = [];
  for (const [dir, endings] of [['src', ['.ts']], ['agent', ['.go']]]) {
    for (const file of sources(join(root, dir), endings)) {
      const lines = readFileSync(file, 'utf8').split('\n').length - 1;
      if (lines > max) found.push(`${relative(root, file)} (${lines} lines)`);
    }
  }
  return found;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const found = oversized();
  if (found.length > 0) {
    console.error(`files over ${MAX} lines; split them by concern:\n  ${found.join('\n  ')}`);
    process.exit(1);
  }
  console.log(`file sizes: none over ${MAX} lines`);
}
