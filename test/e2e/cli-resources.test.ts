import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliSession, jsonOf, tableRows } from '../helpers/cli-session.js';
import { startServer, type ServerProcess } from '../helpers/server-process.js';

const KEY = 'cli-resources-test-key';

/**
 * The client commands of sandbox create's settings, volumes, preview URLs and images, against
 * a spawned server on the fake backend (with the egress proxy, so that proxy-mode sandboxes
 * exist): what a person reads, what a script parses with --json, and the exit codes.
 */
describe('sandboxd volume, ports, images and sandbox create settings (fake backend)', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'sandboxd-cli-resources-'));
  let server: ServerProcess;
  const { cli } = cliSession(() => ({ SERVICE_DATA_DIR: dataDir, SERVICE_API_KEY: KEY, SERVICE_URL: '', CLI_TEST_TOKEN: 'from-the-environment' }));

  beforeAll(async () => {
    server = await startServer(dataDir, ['--backend', 'fake', '--api-key', KEY, '--proxy', '--proxy-port', '0']);
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('creates a sandbox with volumes, a description, an egress allow list and secrets, and shows them', async () => {
    expect(await cli('volume', 'create', 'cache')).toMatchObject({ code: 0, stderr: '' });
    await cli('volume', 'create', 'models');
    const created = await cli(
      'sandbox', 'create', 'web',
      '--volume', 'cache:/data', '--volume', 'models:/models:ro',
      '--description', 'the web box',
      '--network', 'proxy', '--allow', 'pypi.org,*.github.com', '--allow', '10.1.0.0/16:8080', '--deny', 'evil.example.com',
      '--secret', 'CLI_TEST_TOKEN@api.github.com', '--secret', 'OTHER=inline-value@example.com',
    );
    expect(created).toMatchObject({ code: 0, stderr: '' });
    expect(created.stdout).toMatch(/^volumes: +cache:\/data, models:\/models:ro$/m);
    expect(created.stdout).toMatch(/^network: +proxy allow=pypi\.org,\*\.github\.com,10\.1\.0\.0\/16:8080 deny=evil\.example\.com$/m);
    expect(created.stdout).toMatch(/^secrets: +CLI_TEST_TOKEN@api\.github\.com, OTHER@example\.com$/m);
    expect(created.stdout).toMatch(/^description: +the web box$/m);
    // The values went to the server, never to the output.
    expect(created.stdout).not.toMatch(/from-the-environment|inline-value/);

    const shown = jsonOf(await cli('sandbox', 'get', 'web', '--json'));
    expect(shown).toMatchObject({
      description: 'the web box',
      volumes: [{ name: 'cache', path: '/data' }, { name: 'models', path: '/models', read_only: true }],
      network: { egress: 'proxy', allow: ['pypi.org', '*.github.com', '10.1.0.0/16:8080'], deny: ['evil.example.com'] },
      secret_mappings: { CLI_TEST_TOKEN: 'api.github.com', OTHER: 'example.com' },
    });

    // --disk reaches the API: the fake backend cannot bound a sandbox's writes, and says so.
    const disk = await cli('sandbox', 'create', 'disky', '--disk', '2048');
    expect(disk).toMatchObject({ code: 1, stdout: '' });
    expect(disk.stderr).toMatch(/^error: .*does not support disk_mb/);
  });

  it('lists, shows and removes volumes; a mounted one is refused with the API message', async () => {
    const [header, ...rows] = tableRows((await cli('volume', 'ls')).stdout);
    expect(header).toEqual(['NAME', 'IN USE BY', 'AGE']);
    expect(rows).toEqual(
      expect.arrayContaining([
        ['cache', 'web', expect.stringMatching(/^\d+[smhd]$/)],
        ['models', 'web', expect.stringMatching(/^\d+[smhd]$/)],
      ]),
    );
    expect(jsonOf(await cli('--json', 'volumes', 'get', 'cache'))).toEqual({ name: 'cache', created_at: expect.any(String), in_use_by: ['web'] });
    expect((await cli('volume', 'get', 'cache')).stdout).toMatch(/^in use by: web$/m);

    const busy = await cli('volume', 'rm', 'cache');
    expect(busy).toMatchObject({ code: 1, stdout: '' });
    expect(busy.stderr).toMatch(/^error: .*cache.*web/);
    await cli('sandbox', 'rm', 'web');
    expect(await cli('volume', 'rm', 'cache', 'models')).toEqual({ code: 0, stdout: 'cache\nmodels\n', stderr: '' });
    expect(jsonOf(await cli('volume', 'ls', '--json'))).toEqual([]);
    expect(await cli('volume', 'get', 'cache')).toMatchObject({ code: 1, stdout: '', stderr: expect.stringContaining("volume 'cache' not found") });
  });

  it('mints preview URLs: the host form, the path form that works without the key, JSON for scripts', async () => {
    await cli('sandbox', 'create', 'site');
    const host = await cli('ports', 'url', 'site', '8080');
    expect(host.code, host.stderr).toBe(0);
    const port = new URL(server.url).port;
    expect(host.stdout).toMatch(new RegExp(`^http://8080-site\\.sandbox\\.localhost:${port}/\\?exp=\\d+&sig=[\\w-]+\\n$`));

    const path = (await cli('ports', 'url', 'site', '8080', '--path-form', '--expires-in', '2h')).stdout.trim();
    expect(path).toMatch(new RegExp(`^${server.url}/sandboxes/site/ports/8080/\\?exp=\\d+&sig=[\\w-]+$`));
    // The signature lets a request without the key through to the port (which the fake backend cannot reach: 422);
    // without it, the key is asked for.
    expect((await fetch(path)).status).toBe(422);
    expect((await fetch(path.replace(/\?.*$/, ''))).status).toBe(401);

    const minted = jsonOf(await cli('port', 'url', 'site', '3000', '--json'));
    expect(minted).toEqual({ url: expect.stringContaining('3000-site.'), path_url: expect.stringContaining('/sandboxes/site/ports/3000/'), expires_at: expect.any(String) });

    expect(await cli('ports', 'url', 'site', '0')).toMatchObject({ code: 2, stdout: '', stderr: "error: port '0': expected a TCP port, 1-65535\n" });
    expect(await cli('ports', 'url', 'site', '80', '--expires-in', '90d')).toMatchObject({ code: 1, stderr: expect.stringContaining('at most 30d') });
    expect(await cli('ports', 'url', 'nowhere', '80')).toMatchObject({ code: 1, stderr: expect.stringContaining("sandbox 'nowhere' not found") });
    await cli('sandbox', 'rm', 'site');
  });

  it("lists the server's images (the catalog here; built ones in test/integration/api-images.test.ts)", async () => {
    const [header, ...rows] = tableRows((await cli('images', 'list')).stdout);
    expect(header).toEqual(['NAME', 'KIND', 'TAG', 'STATUS', 'ID', 'SIZE', 'CREATED']);
    expect(rows).toContainEqual(['base', 'catalog', 'sandboxd/base:bookworm', 'absent', '-', '-', '-']);
    const listed = jsonOf<{ name: string; kind: string }[]>(await cli('--json', 'images', 'ls'));
    expect(listed.map((image) => `${image.kind}:${image.name}`)).toEqual(expect.arrayContaining(['catalog:base', 'catalog:python', 'catalog:node']));
    expect(jsonOf(await cli('images', 'builds', '--json'))).toEqual([]);
    // The fake backend builds no image: the API's refusal, exit 1.
    expect(await cli('images', 'rm', 'mine')).toMatchObject({ code: 1, stdout: '', stderr: expect.stringMatching(/^error: .*Dockerfile/) });
  });

  it('builds several catalog images at once: each failure is its own line naming the image, exit 1', async () => {
    // Unknown names fail before Docker is asked, so no image is built here.
    const result = await cli('images', 'build', 'nosuch', 'other');
    expect(result).toMatchObject({ code: 1, stdout: '' });
    expect(result.stderr.split('\n').filter(Boolean).sort()).toEqual([
      "sandboxd: nosuch: unknown image 'nosuch'; the catalog has: base, python, node, browser",
      "sandboxd: other: unknown image 'other'; the catalog has: base, python, node, browser",
    ]);
  });

  it('exits 2 naming the flag when an input is malformed, before asking the server', async () => {
    const cases: [string[], string][] = [
      [['sandbox', 'create', 'x', '--volume', 'cache'], "--volume 'cache': expected NAME:/path or NAME:/path:ro"],
      [['sandbox', 'create', 'x', '--volume', 'cache:data'], "--volume 'cache:data': expected NAME:/path or NAME:/path:ro"],
      [['sandbox', 'create', 'x', '--network', 'wide'], "--network 'wide': expected one of open, proxy, none"],
      [['sandbox', 'create', 'x', '--profile', 'lax'], "--profile 'lax': expected one of permissive, moderate, restrictive"],
      [['sandbox', 'create', 'x', '--disk', '2g'], "--disk '2g': expected a whole number"],
      [['sandbox', 'create', 'x', '--secret', 'TOKEN'], "--secret 'TOKEN': expected NAME@HOST or NAME=VALUE@HOST"],
      [['sandbox', 'create', 'x', '--secret', 'CLI_TEST_UNSET@api.example.com'], "--secret 'CLI_TEST_UNSET@api.example.com': CLI_TEST_UNSET is not set in this environment: export it, or give NAME=VALUE@HOST"],
      [['ports', 'url', 'x', 'http'], "port 'http': expected a TCP port, 1-65535"],
      [['volume', 'create'], "error: missing required argument 'name'"],
      [['volume', 'frob'], "error: unknown command 'frob'"],
    ];
    for (const [args, message] of cases) {
      const result = await cli(...args);
      expect(result, args.join(' ')).toMatchObject({ code: 2, stdout: '' });
      expect(result.stderr, args.join(' ')).toContain(message);
    }
    // Nothing was made by the refused creates.
    expect(jsonOf<unknown[]>(await cli('sandbox', 'ls', '--json')).length).toBe(0);
  });
});
