import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { benchCreate, benchExec } from './core-bench.js';

/**
 * `npm run bench`: starts a real server on a temporary data directory and prints each
 * figure beside the plain alternative measured in the same run. Never part of npm test.
 */
async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'sandboxd-bench-'));
  const cli = resolve(import.meta.dirname, '../src/cli/main.js');
  const server = spawn(process.execPath, [cli, 'serve', '--data-dir', dataDir, '--port', '0', '--log-level', 'warn'], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  try {
    const serverFile = join(dataDir, 'server.json');
    const deadline = Date.now() + 60_000;
    while (!existsSync(serverFile)) {
      if (Date.now() > deadline || server.exitCode !== null) throw new Error('server did not start');
      await new Promise((r) => setTimeout(r, 50));
    }
    const api = { url: (JSON.parse(readFileSync(serverFile, 'utf8')) as { url: string }).url };
    const n = Number(process.env.BENCH_N ?? 20);
    process.stdout.write(`sandboxd bench: n=${n} per figure (BENCH_N), server ${api.url}\n`);
    await benchCreate(api, Math.max(5, Math.round(n / 2)));
    await benchExec(api, n * 3);
  } finally {
    server.kill('SIGTERM');
    await new Promise((r) => server.once('exit', r));
    rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
