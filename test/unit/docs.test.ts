import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { documents } from '../../scripts/docs/generate-docs.js';
import { brokenLinks } from '../../scripts/docs/links.js';
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
      const fresh = generatedBlocks(regenerate(text, file, render));
      generatedBlocks(text).forEach((block, index) => {
        used.add(block.name);
        expect(block.body, `${file}: the table '${block.name}' is stale: run npm run build && npm run docs`).toBe(fresh[index]?.body);
      });
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

  it('describe each route the API serves in exactly one route table', async () => {
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
    for (const route of served) if (!seen.has(route)) problems.push(`${route} is described in no route table`);
    expect(problems).toEqual([]);
  });

  it('link only to files and headings that exist', () => {
    expect(brokenLinks(ROOT, [...documents(ROOT), 'ARCHITECTURE.md'])).toEqual([]);
  });

  it('find a link to a missing file or heading', () => {
    const root = mkdtempSync(join(tmpdir(), 'sandboxd-links-'));
    try {
      mkdirSync(join(root, 'docs'));
      writeFileSync(join(root, 'docs', 'a.md'), '# A page\n\n## Disk quota\n');
      writeFileSync(join(root, 'README.md'), '[ok](docs/a.md#disk-quota) [web](https://x.org/y) [gone](docs/b.md) [no heading](docs/a.md#nope)\n');
      expect(brokenLinks(root, ['README.md'])).toEqual(['README.md: docs/b.md', 'README.md: docs/a.md#nope']);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
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
