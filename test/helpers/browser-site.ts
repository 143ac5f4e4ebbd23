import { expect } from 'vitest';
import { buildImage } from '../../src/images/image-builder.js';
import { call } from './docker-runtime.js';

export const BROWSER_IMAGE = 'sandboxd/browser:bookworm';
/** Where the test site is served from inside the sandbox (nothing leaves the machine). */
export const SITE = 'http://127.0.0.1:8000';

/** Builds the browser image when it is absent or stale (about a minute); a no-op otherwise. */
export async function ensureBrowserImage(): Promise<void> {
  await buildImage('browser');
}

/** A form with a text input, a button that writes a greeting, and a link to a second page. */
export const FORM_PAGE = `<!doctype html>
<html><head><title>Greeter</title></head><body>
<h1>Greeter</h1>
<label for="who">Your name</label> <input id="who" type="text">
<button id="greet" onclick="document.getElementById('out').textContent = 'Hello, ' + document.getElementById('who').value + '!'">Greet</button>
<p id="out">Nobody greeted yet</p>
<a href="/next.html">Next page</a>
</body></html>`;

const NEXT_PAGE = `<!doctype html><html><head><title>Next</title></head><body><h1>Arrived</h1><a href="/index.html">Back</a></body></html>`;

/** The site's files, as `POST /sandboxes/{name}/files` (and `sandbox_write_files`) take them. */
export const SITE_FILES = { '/workspace/site/index.html': FORM_PAGE, '/workspace/site/next.html': NEXT_PAGE };

/**
 * The detached command (it must outlive its request: an exec's processes end with it) that serves
 * the site on 127.0.0.1:8000 inside the sandbox, and the command that waits until it answers.
 */
export const SERVE = { command: ['python3', '-m', 'http.server', '8000', '--bind', '127.0.0.1'], workdir: '/workspace/site' };
export const WAIT_COMMAND = ['bash', '-c', 'for _ in $(seq 50); do curl -sf -o /dev/null http://127.0.0.1:8000/ && exit 0; sleep 0.1; done; exit 1'];

/** Writes the site into the sandbox and serves it, over the HTTP API at `baseUrl`. */
export async function serveSite(baseUrl: string, name: string): Promise<void> {
  const files = await call(baseUrl, 'POST', `/sandboxes/${name}/files`, { files: SITE_FILES });
  expect(files.status, JSON.stringify(files.body)).toBe(200);
  const started = await call(baseUrl, 'POST', `/sandboxes/${name}/exec/detach`, SERVE);
  expect(started.status, JSON.stringify(started.body)).toBe(200);
  const served = await call(baseUrl, 'POST', `/sandboxes/${name}/exec`, { command: WAIT_COMMAND });
  expect(served.body.data?.exit_code, JSON.stringify(served.body)).toBe(0);
}
