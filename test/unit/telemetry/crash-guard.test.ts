import { spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { installCrashGuard } from '../../../src/telemetry/crash-guard.js';
import { silentLogger } from '../../../src/telemetry/logger.js';
import { Metrics } from '../../../src/telemetry/metrics.js';

const GUARD = resolve(import.meta.dirname, '../../../dist/src/telemetry/crash-guard.js');
const LOGGER = resolve(import.meta.dirname, '../../../dist/src/telemetry/logger.js');

const metrics = () =>
  new Metrics(
    { activeSandboxes: async () => 0, activeObjects: async () => 0, warmPoolSize: () => 0, eventClients: () => 0, webhookQueue: () => ({ queued: 0, inFlight: 0 }) },
    { version: 'test', backend: 'fake' },
  );

describe('the crash guard', () => {
  it('counts each escaped error by kind, and removes its listeners again', async () => {
    const target = new EventEmitter();
    const m = metrics();
    const unguard = installCrashGuard(target, silentLogger(), m.uncaughtErrors);
    target.emit('uncaughtException', new Error('boom'));
    target.emit('unhandledRejection', new Error('nobody awaited'));
    target.emit('unhandledRejection', 'not even an error');
    const text = (await m.scrape()).text;
    expect(text).toContain('sandboxd_uncaught_errors_total{kind="exception"} 1');
    expect(text).toContain('sandboxd_uncaught_errors_total{kind="rejection"} 2');
    unguard();
    expect(target.listenerCount('uncaughtException') + target.listenerCount('unhandledRejection')).toBe(0);
  });

  it('keeps a real process serving through a thrown error and a rejection no one handled', async () => {
    // The built module on the real `process` (setup builds dist/): without the guard Node exits 1 at the throw.
    const script = `
      const { installCrashGuard } = await import(${JSON.stringify(GUARD)});
      const { createLogger } = await import(${JSON.stringify(LOGGER)});
      let count = 0;
      installCrashGuard(process, createLogger('error'), { inc: () => count++ });
      setTimeout(() => { throw new Error('escaped a timer'); }, 1);
      void Promise.reject(new Error('escaped a promise'));
      setTimeout(() => { console.log('alive after ' + count); }, 100);
    `;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    const code = await new Promise((done) => child.on('exit', done));
    expect(code, stderr).toBe(0);
    expect(stdout.trim()).toBe('alive after 2');
    expect(stderr).toContain('escaped a timer');
    expect(stderr).toContain('escaped a promise');
  });
});
