import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BROWSER_IMAGE, ensureBrowserImage, SERVE, SITE, SITE_FILES, WAIT_COMMAND } from '../helpers/browser-site.js';
import { uniqueName } from '../helpers/docker-runtime.js';
import { startMcp, texts, type McpProcess } from '../helpers/mcp-process.js';

/** The browser tools of `sandboxd mcp` (in-process, stdio) driven by the MCP SDK's client, on real Docker and Chromium. */
describe('sandboxd mcp browser tools', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'sandboxd-mcp-browser-'));
  const name = uniqueName('mcp-browser');
  let mcp: McpProcess;
  /** A tool's single text block; fails the test on an error result. */
  const textOf = async (tool: string, args: Record<string, unknown>) => {
    const result = await mcp.call(tool, args);
    expect(result.isError, texts(result)[0]).toBeFalsy();
    return texts(result)[0]!;
  };
  const refOf = (snapshot: string, pattern: RegExp) => new RegExp(`${pattern.source}.*\\[ref=(\\w+)\\]`).exec(snapshot)![1]!;

  beforeAll(async () => {
    await ensureBrowserImage();
    mcp = await startMcp(['--data-dir', dataDir]);
    await textOf('sandbox_create', { name, image: BROWSER_IMAGE });
    await textOf('sandbox_write_files', { name, files: SITE_FILES });
    await textOf('sandbox_exec_detach', { name, ...SERVE });
    expect(await textOf('sandbox_exec', { name, command: WAIT_COMMAND })).toMatch(/^exit_code: 0/);
  }, 600_000);
  afterAll(async () => {
    await mcp?.call('sandbox_remove', { name }).catch(() => undefined);
    await mcp?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('opens, fills, clicks, snapshots, screenshots, closes and logs', async () => {
    const opened = await textOf('browser_open', { name, url: `${SITE}/index.html` });
    expect(opened).toMatch(new RegExp(`^url: ${SITE}/index.html\ntitle: Greeter\nrefs: e\\d+`));
    const filled = await textOf('browser_fill', { name, ref: refOf(opened, /textbox "Your name"/), value: 'Lin' });
    const clicked = await textOf('browser_click', { name, ref: refOf(filled, /button "Greet"/) });
    expect(clicked).toContain('Hello, Lin!');
    expect(await textOf('browser_click', { name, selector: 'a' })).toMatch(/title: Next/);
    expect(await textOf('browser_snapshot', { name })).toContain('Arrived');

    const shot = await mcp.call('browser_screenshot', { name });
    expect(shot.content).toEqual([{ type: 'image', mimeType: 'image/png', data: expect.any(String) }]);
    const png = Buffer.from((shot.content[0] as { data: string }).data, 'base64');
    expect(png.subarray(1, 4).toString('latin1')).toBe('PNG');
    expect([png.readUInt32BE(16), png.readUInt32BE(20)]).toEqual([1280, 720]);

    expect(await textOf('browser_close', { name })).toBe("closed page 'default'");
    const events = JSON.parse(await textOf('browser_events', { name, offset: 1, limit: 3 }));
    expect(events.map((e: { seq: number; type: string }) => [e.seq, e.type])).toEqual([
      [1, 'page.navigated'],
      [2, 'page.filled'],
      [3, 'page.clicked'],
    ]);
  });

  it('says which tool to use when a page is not open or a ref is stale', async () => {
    const closed = await mcp.call('browser_snapshot', { name, page: 'other' });
    expect(closed.isError).toBe(true);
    expect(texts(closed)[0]).toContain(`browser_open (name '${name}', page 'other')`);
    await textOf('browser_open', { name, url: `${SITE}/index.html` });
    const stale = await mcp.call('browser_click', { name, ref: 'e999' });
    expect(stale.isError).toBe(true);
    expect(texts(stale)[0]).toContain(`take a new snapshot (browser_snapshot (name '${name}', page 'default'))`);
  });
});
