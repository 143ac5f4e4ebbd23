import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { documents } from '../../scripts/docs/generate-docs.js';
import { fillGenerated, generatedBlocks } from '../../scripts/docs/markers.js';
import { regenerate, renderers } from '../../scripts/docs/render.js';
import { routeKey, routeMentions } from '../../scripts/docs/route-mentions.js';
import { servedRoutes } from '../../scripts/docs/route-table.js';

const ROOT = join(import.meta.dirname, '..', '..');
const read = (file: string) => readFileSync(join(ROOT, file), 'utf8');

let render: Record<string, () => string>;
beforeAll(async () => {
  render = await renderers();
});

describe('the docs', () => {
  it('hold every generated table as the code makes it now (npm run build && npm run docs rewrites them)', () => {
    const used = new Set<string>();
    for (const file of documents(ROOT)) {
      const text = read(file);
      for (const block of generatedBlocks(text)) used.add(block.name);
      expect(regenerate(text, file, render), `${file} has a stale generated table: run npm run build && npm run docs`).toBe(text);
    }
    expect([...used].sort()).toEqual(Object.keys(render).sort());
  });

  it('notice a stale table, an unknown block and a missing closing marker', () => {
    const text = read('docs/mcp.md');
    const stale = text.replace(/\| `sandbox_exec` \|[^\n]*\n/, '');
    expect(stale).not.toBe(text);
    expect(regenerate(stale, 'docs/mcp.md', render)).toBe(text);
    expect(() => regenerate('<!-- generated:nope -->\nx\n<!-- /generated:nope -->', 'x.md', render)).toThrow(/unknown generated block 'nope'/);
    expect(() => fillGenerated('<!-- generated:options -->\nx\n', () => '')).toThrow(/no closing/);
  });

  it('describe each route in one hand-written table only, and only routes the API serves', async () => {
    // The document lists every route but its own.
    const served = new Set([...(await servedRoutes()).map((route) => routeKey(route.method, route.path)), 'GET /openapi.json']);
    const seen = new Map<string, string>();
    const problems: string[] = [];
    for (const file of documents(ROOT)) {
      for (const mention of routeMentions(read(file), file)) {
        const where = `${mention.file}:${mention.line}`;
        if (!served.has(mention.route)) problems.push(`${where}: ${mention.route} is not a route of the API`);
        const before = seen.get(mention.route);
        if (before) problems.push(`${where}: ${mention.route} is described already at ${before}`);
        else seen.set(mention.route, where);
      }
    }
    expect(problems).toEqual([]);
    expect(seen.size).toBeGreaterThan(50);
  });

  it('find routes in the first cell of the rows of route tables, outside generated blocks', () => {
    const text = [
      '| method and path | what it does |',
      '|---|---|',
      '| `GET /a/{x}`, `GET/DELETE /b/{id}?limit=1` | `POST /not-first-cell` |',
      '',
      '| figure | p50 |',
      '|---|---|',
      '| `POST /c` of a file | 1 ms |',
      'prose `PUT /not/a/row`',
      '<!-- generated:routes -->',
      '| `GET /generated` |',
      '<!-- /generated:routes -->',
    ].join('\n');
    expect(routeMentions(text, 'x.md').map((mention) => mention.route)).toEqual(['GET /a/{}', 'GET /b/{}', 'DELETE /b/{}']);
  });
});
