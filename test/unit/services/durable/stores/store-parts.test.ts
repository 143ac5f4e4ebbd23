import { describe, expect, it } from 'vitest';
import { ServiceError } from '../../../../../src/errors.js';
import { hostAllowed, HANDLE_IDLE_MS, mergePatch, StoreHandles, type StoreHandle } from '../../../../../src/services/durable/stores/index.js';
import { configView, hostOf, scrubbed, splitCredentials } from '../../../../../src/services/durable/stores/store-credentials.js';
import { silentLogger } from '../../../../../src/telemetry/logger.js';
import { manualClock } from '../../../../helpers/manual-clock.js';

describe('store parts', () => {
  it('matches host globs: * any run, ? one character, case-insensitive, nothing else', () => {
    expect(hostAllowed('db.internal', ['*'])).toBe(true);
    expect(hostAllowed('a.b.example.com', ['*.example.com'])).toBe(true);
    expect(hostAllowed('example.com', ['*.example.com'])).toBe(false);
    expect(hostAllowed('DB1.internal', ['db?.internal'])).toBe(true);
    expect(hostAllowed('db12.internal', ['db?.internal'])).toBe(false);
    expect(hostAllowed('10.0.0.5', ['10.0.0.*'])).toBe(true);
    expect(hostAllowed('10.0.0.5', ['10.0.0.5+'])).toBe(false);
    expect(hostAllowed('anything', [])).toBe(false);
  });

  it('merges a patch as RFC 7396', () => {
    expect(mergePatch({ a: 1, b: { c: 2, d: 3 }, e: [1] }, { a: null, b: { c: null, x: 1 }, e: [2], f: 'n' })).toEqual({ b: { d: 3, x: 1 }, e: [2], f: 'n' });
  });

  it('reads the host from host, else the url, and masks a url only when a password is kept', () => {
    expect(hostOf({ host: 'db', url: 'postgres://x@other/y' })).toBe('db');
    expect(hostOf({ url: 'postgres://x@[::1]:5432/y' })).toBe('::1');
    expect(hostOf({ url: 'not a url' })).toBeUndefined();
    expect(configView({ url: 'redis://h:6379' }, true)).toEqual({ url: 'redis://:****@h:6379', password_set: true });
    expect(configView({ url: 'redis://h:6379' }, false)).toEqual({ url: 'redis://h:6379' });
    expect(splitCredentials('redis', { url: 'redis://:p%40ss@h:6379' })).toMatchObject({ password: 'p@ss', engine: { url: 'redis://h:6379' } });
  });

  it('scrubs a password from a driver exception (logged, never answered), also URL-encoded, and leaves answers alone', () => {
    const clean = new Error('syntax error');
    expect(scrubbed(clean, 'p@ss')).toBe(clean);
    const plain = scrubbed(new Error('driver said p@ss in x://u:p%40ss@h'), 'p@ss') as Error;
    expect([plain instanceof ServiceError, plain.message]).toEqual([false, 'driver said **** in x://u:****@h']);
    // A ServiceError is an answer, made of fixed text and what the caller chose: masking the
    // password in it would tell the caller which of their words was the password.
    const answer = new ServiceError('SQL_ERROR', "store 'p@ss': syntax error");
    expect(scrubbed(answer, 'p@ss')).toBe(answer);
  });

  it('never counts a handle in use as idle, and closes it once idle after its last use', async () => {
    const clock = manualClock();
    let pokes = 0;
    const handles = new StoreHandles(clock.clock, silentLogger(), () => void pokes++);
    let closed = 0;
    const handle: StoreHandle = { close: async () => void closed++ };
    let finish!: () => void;
    const running = handles.use({ id: 's', name: 'db' }, async () => handle, () => new Promise<void>((resolve) => (finish = resolve)));
    await Promise.resolve();
    expect(pokes).toBe(1);
    expect(handles.nextDue()).toBeNull();
    clock.advance((2 * HANDLE_IDLE_MS) / 1000);
    await handles.tick(clock.clock());
    expect(closed).toBe(0);
    finish();
    await running;
    expect(handles.nextDue()).toEqual(new Date(clock.clock().getTime() + HANDLE_IDLE_MS));
    clock.advance(HANDLE_IDLE_MS / 1000);
    await handles.tick(clock.clock());
    expect([closed, handles.size]).toEqual([1, 0]);
  });

  it('refuses to open the handle of a retired store, and closes a handle that was opening', async () => {
    const handles = new StoreHandles(manualClock().clock, silentLogger(), () => undefined);
    let closed = 0;
    let opened!: (handle: StoreHandle) => void;
    const running = handles.use({ id: 's', name: 'db' }, () => new Promise<StoreHandle>((resolve) => (opened = resolve)), async () => 'done');
    const retiring = handles.retire('s');
    opened({ close: async () => void closed++ });
    await retiring;
    expect(closed).toBe(1);
    expect(await running).toBe('done');
    await expect(handles.use({ id: 's', name: 'db' }, async () => ({ close: async () => undefined }), async () => 'again')).rejects.toThrow("store 'db' not found");
    expect(handles.size).toBe(0);
  });
});
