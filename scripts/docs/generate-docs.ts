import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { regenerate, renderers } from './render.js';

/**
 * `npm run docs` (after `npm run build`): rewrites the generated blocks of README.md and
 * docs/**.md from the code. `--check` writes nothing and exits 1 when a block is stale.
 */

/** The repository's root, from dist/scripts/docs/ or scripts/docs/. */
export function repositoryRoot(from = fileURLToPath(new URL('.', import.meta.url))): string {
  const parts = from.split('/');
  const at = parts.lastIndexOf(parts.includes('dist') ? 'dist' : 'scripts');
  return parts.slice(0, at).join('/');
}

/** README.md and every Markdown file under docs/, relative to the root. */
export function documents(root: string): string[] {
  const walk = (dir: string): string[] =>
    readdirSync(join(root, dir), { withFileTypes: true }).flatMap((entry) =>
      entry.isDirectory() ? walk(join(dir, entry.name)) : entry.name.endsWith('.md') ? [join(dir, entry.name)] : [],
    );
  return ['README.md', ...walk('docs').sort()];
}

async function main(): Promise<void> {
  const check = process.argv.includes('--check');
  const root = repositoryRoot();
  const render = await renderers();
  const stale: string[] = [];
  for (const file of documents(root)) {
    const path = join(root, file);
    const text = readFileSync(path, 'utf8');
    const fresh = regenerate(text, file, render);
    if (fresh === text) continue;
    stale.push(file);
    if (!check) writeFileSync(path, fresh);
  }
  if (check && stale.length > 0) {
    process.stderr.write(`generated tables are stale in ${stale.join(', ')}: run npm run build && npm run docs\n`);
    process.exitCode = 1;
  } else {
    process.stdout.write(stale.length > 0 ? `rewrote ${stale.join(', ')}\n` : 'generated tables are up to date\n');
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await main();
