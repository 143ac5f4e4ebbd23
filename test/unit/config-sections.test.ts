import { readdirSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { beforeAll, describe, expect, it } from 'vitest';

/**
 * Settings are parsed once: every default lives in src/config/config-schema.ts, and services are
 * handed the parsed config (ConfigSection). This test reads src/ with the TypeScript checker and
 * fails on a service that defaults a configured value again: `config.poolSize ?? 0`,
 * `config.poolSize || 2`, `x ??= ...`, or `{ poolSize = 0 } = config`, where the option's type
 * has no `undefined` because the schema already gave it a default. Options without a default
 * (`policyMode`, `tlsCert`, ...) may fall back: absent means something there.
 */
const ROOT = resolve(import.meta.dirname, '../..');
const SCHEMA = join(ROOT, 'src/config/config-schema.ts');
const PLANTED = join(ROOT, 'src/services/planted-default.ts');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** The places under src/ (besides `extra` files, path -> text) that default a defaulted option. */
function redundantDefaults(extra: Record<string, string> = {}): string[] {
  const configFile = ts.readConfigFile(join(ROOT, 'tsconfig.json'), (path) => ts.sys.readFile(path));
  const { options } = ts.parseJsonConfigFileContent(configFile.config, ts.sys, ROOT);
  const host = ts.createCompilerHost({ ...options, noEmit: true });
  const readFile = host.readFile.bind(host);
  host.readFile = (path) => extra[path] ?? readFile(path);
  const fileExists = host.fileExists.bind(host);
  host.fileExists = (path) => path in extra || fileExists(path);
  const roots = [...sourceFiles(join(ROOT, 'src')), ...Object.keys(extra)];
  const program = ts.createProgram({ rootNames: roots, options: { ...options, noEmit: true }, host });
  const checker = program.getTypeChecker();

  /**
   * Whether `symbol` is an option of the config schema whose type the schema made non-optional
   * (a boolean flag is left out: `config.events || ...` combines flags, it defaults nothing).
   */
  const isDefaultedOption = (symbol: ts.Symbol | undefined, at: ts.Node): boolean => {
    if (!symbol?.declarations?.some((declaration) => declaration.getSourceFile().fileName === SCHEMA)) return false;
    const type = checker.getTypeOfSymbolAtLocation(symbol, at);
    const parts = type.isUnion() ? type.types : [type];
    return !parts.some((part) => part.flags & (ts.TypeFlags.Undefined | ts.TypeFlags.BooleanLike));
  };
  const optionName = (expression: ts.Expression): ts.Node | undefined => {
    const inner = ts.skipPartiallyEmittedExpressions(ts.isParenthesizedExpression(expression) ? expression.expression : expression);
    return ts.isPropertyAccessExpression(inner) ? inner.name : undefined;
  };
  const found: string[] = [];
  const where = (node: ts.Node) => {
    const file = node.getSourceFile();
    const { line } = file.getLineAndCharacterOfPosition(node.getStart());
    return `${relative(ROOT, file.fileName)}:${line + 1}: ${node.getText().slice(0, 80)}`;
  };
  const fallbacks = new Set([ts.SyntaxKind.QuestionQuestionToken, ts.SyntaxKind.BarBarToken, ts.SyntaxKind.QuestionQuestionEqualsToken, ts.SyntaxKind.BarBarEqualsToken]);
  const visit = (node: ts.Node): void => {
    if (ts.isBinaryExpression(node) && fallbacks.has(node.operatorToken.kind)) {
      const name = optionName(node.left);
      if (name && isDefaultedOption(checker.getSymbolAtLocation(name), name)) found.push(where(node));
    }
    if (ts.isBindingElement(node) && node.initializer && ts.isObjectBindingPattern(node.parent)) {
      const key = node.propertyName ?? node.name;
      const property = ts.isIdentifier(key) ? checker.getTypeAtLocation(node.parent).getProperty(key.text) : undefined;
      if (isDefaultedOption(property, node)) found.push(where(node));
    }
    ts.forEachChild(node, visit);
  };
  for (const file of program.getSourceFiles()) {
    const path = file.fileName;
    if (path.startsWith(join(ROOT, 'src/')) && !path.startsWith(join(ROOT, 'src/config/'))) visit(file);
  }
  return found;
}

describe('settings are parsed once (src/config/config-schema.ts)', () => {
  // One read of src/ with a planted file beside it, which defaults options in each form.
  const planted = [
    "import type { Config, ConfigSection } from '../config/config-schema.js';",
    'export const a = (config: ConfigSection<"pool">) => config.poolSize ?? 0;',
    'export const b = (config: Config) => config.storeTimeout || 10_000;',
    'export const c = ({ poolMemoryMb = 8192 }: ConfigSection<"pool">) => poolMemoryMb;',
    '// an option without a default may fall back: absent means "the rule file says"',
    'export const d = (config: Config) => config.policyMode ?? "enforce";',
  ].join('\n');
  let found: string[] = [];
  beforeAll(() => {
    found = redundantDefaults({ [PLANTED]: planted });
  }, 120_000);

  it('no service defaults an option the schema already defaulted', () => {
    expect(found.filter((place) => !place.startsWith('src/services/planted-default.ts'))).toEqual([]);
  });

  it('names a service that does, in each form', () => {
    expect(found.filter((place) => place.startsWith('src/services/planted-default.ts'))).toEqual([
      'src/services/planted-default.ts:2: config.poolSize ?? 0',
      'src/services/planted-default.ts:3: config.storeTimeout || 10_000',
      'src/services/planted-default.ts:4: poolMemoryMb = 8192',
    ]);
  });
});
