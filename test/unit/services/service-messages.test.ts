import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/** An HTTP method followed by a route: what a service message must not spell (a `NextStep` says it). */
const METHOD_AND_ROUTE = /\b(?:GET|HEAD|POST|PUT|PATCH|DELETE) \//;

const SERVICES = join(import.meta.dirname, '../../../src/services');

/** Every .ts file under `dir`. */
function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** The string and template literals of a source text that spell a method and route, with their line. */
function routeLiterals(fileName: string, text: string): { line: number; text: string }[] {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true);
  const found: { line: number; text: string }[] = [];
  const visit = (node: ts.Node): void => {
    let literal: string | undefined;
    if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) literal = node.text;
    // A template's fixed parts joined with a placeholder: `POST /stores/${name}/execute` is caught.
    else if (ts.isTemplateExpression(node)) literal = [node.head.text, ...node.templateSpans.map((span) => span.literal.text)].join('${}');
    if (literal !== undefined && METHOD_AND_ROUTE.test(literal)) {
      found.push({ line: source.getLineAndCharacterOfPosition(node.getStart()).line + 1, text: literal });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

describe('service messages', () => {
  it('spell no HTTP method and route: the next step is a NextStep that each face renders', () => {
    const offenders = sourceFiles(SERVICES).flatMap((file) =>
      routeLiterals(file, readFileSync(file, 'utf8')).map(({ line, text }) => `${relative(SERVICES, file)}:${line}: ${text}`),
    );
    expect(offenders).toEqual([]);
  });

  it('finds a route in plain strings and in templates, but not in comments', () => {
    const planted = [
      "const a = 'use POST /stores/x/execute';",
      'const b = `create it with PUT /llm/keys/${provider}`;',
      'const c = `${verb} it first (DELETE /proxy/hooks/${name})`;',
      '// GET /images in a comment is documentation, not a message',
      "const d = 'GET lists, not a route';",
    ].join('\n');
    expect(routeLiterals('planted.ts', planted).map((hit) => hit.line)).toEqual([1, 2, 3]);
  });
});
