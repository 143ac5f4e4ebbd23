#!/usr/bin/env node
// Fails when src/ holds more non-null assertions (`value!`) than the budget below: each one is a
// claim the compiler cannot check, so a new one should be a narrowed type or a guard that throws
// instead (docs/decisions.md, "Code rules"). Counted with the TypeScript parser (NonNullExpression
// nodes), so `!==`, `!value` and `definite!:` fields are not counted.
// Usage: node scripts/check-non-null.mjs [--list]
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
/** The most non-null assertions src/ may hold; lower it when some go, never raise it. */
export const BUDGET = 11;

/** TypeScript files below `dir`. */
function* sources(dir) {
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) yield* sources(path);
    else if (entry.endsWith('.ts')) yield path;
  }
}

/** Every non-null assertion in the `.ts` files under `root/src`, as `path:line`. */
export function nonNullAssertions(root = ROOT) {
  const found = [];
  for (const file of sources(join(root, 'src'))) {
    const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
    const visit = (node) => {
      if (ts.isNonNullExpression(node)) found.push(`${relative(root, file)}:${source.getLineAndCharacterOfPosition(node.getStart()).line + 1}`);
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return found;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const found = nonNullAssertions();
  if (process.argv.includes('--list')) console.log(found.join('\n'));
  if (found.length > BUDGET) {
    console.error(`${found.length} non-null assertions in src/, budget ${BUDGET}: narrow the type or throw a guard instead (--list names them)`);
    process.exit(1);
  }
  console.log(`non-null assertions: ${found.length} in src/ (budget ${BUDGET})`);
}
