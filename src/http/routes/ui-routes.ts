import { readFile, stat } from 'node:fs/promises';
import { extname, join, resolve, sep } from 'node:path';
import type { FastifyReply } from 'fastify';
import { notFound } from '../../errors.js';
import { PACKAGE_ROOT } from '../../paths.js';
import type { App } from '../route-types.js';

/** Where setup builds the dashboard (web/ -> dist/web). */
export const DEFAULT_WEB_ROOT = join(PACKAGE_ROOT, 'dist', 'web');

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
};

/** Vite names what it emits under assets/ by content hash: those never change under one name. */
const IMMUTABLE = /^assets\//;

/**
 * The file under `root` a request path names, or undefined when it leaves `root` (`..`, an
 * absolute path, a NUL byte). The router has already percent-decoded the path once.
 */
export function fileUnder(root: string, relative: string): string | undefined {
  if (relative.includes('\0')) return undefined;
  const base = resolve(root);
  const full = resolve(base, `.${sep}${relative}`);
  return full.startsWith(base + sep) ? full : undefined;
}

/**
 * The dashboard (`/ui/`) and the API reference (`/docs`, the same bundle reading
 * /openapi.json): static files that need no key; every API call the page makes presents one.
 * `GET /` sends browsers (Accept: text/html) to the dashboard.
 */
export async function uiRoutes(app: App, { webRoot }: { webRoot: string }): Promise<void> {
  const send = async (reply: FastifyReply, relative: string) => {
    const file = fileUnder(webRoot, relative);
    const info = file ? await stat(file).catch(() => undefined) : undefined;
    if (!file || !info?.isFile()) {
      const built = await stat(join(webRoot, 'index.html')).catch(() => undefined);
      throw notFound(built ? `no file /ui/${relative}` : 'the dashboard is not built: run `npm run setup` (it builds web/ into dist/web)');
    }
    return reply
      .type(TYPES[extname(file)] ?? 'application/octet-stream')
      .header('cache-control', IMMUTABLE.test(relative) ? 'public, max-age=31536000, immutable' : 'no-cache')
      .header('x-content-type-options', 'nosniff')
      .send(await readFile(file));
  };

  const hide = { schema: { hide: true } };
  app.get('/', hide, async (request, reply) => {
    if (!(request.headers.accept ?? '').includes('text/html')) throw notFound('route GET / not found: the API has no root; see /openapi.json');
    return reply.redirect('/ui/');
  });
  app.get('/ui', hide, async (_request, reply) => reply.redirect('/ui/'));
  app.get('/ui/*', hide, async (request, reply) => send(reply, (request.params as { '*': string })['*'] || 'index.html'));
  app.get('/docs', hide, async (_request, reply) => send(reply, 'index.html'));
}
