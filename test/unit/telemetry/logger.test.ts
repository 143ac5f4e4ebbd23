import { describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/telemetry/logger.js';

/** A logger that writes its JSON lines into an array. */
function capture() {
  const lines: string[] = [];
  const logger = createLogger('info', { write: (line: string) => void lines.push(line) });
  return { logger, lines, parsed: () => lines.map((line) => JSON.parse(line) as Record<string, unknown>) };
}

describe('createLogger', () => {
  it('redacts passwords, secret values and credential headers, in child loggers too', () => {
    const { logger, lines, parsed } = capture();
    logger.info(
      {
        store: { name: 'orders', password: 'hunter2' },
        secret: { name: 'OPENAI_API_KEY', value: 'sk-live-123' },
        req: { method: 'GET', headers: { host: 'h', authorization: 'Bearer bearer-456', 'x-api-key': 'header-key-789' } },
        authorization: 'Bearer top-level-1',
        'x-api-key': 'top-level-2',
      },
      'store created',
    );
    logger.child({ part: 'stores' }).warn({ config: { host: 'db', password: 'child-pw' } }, 'connect failed');
    logger.info({ store: { name: 'pg', config: { host: 'db', password: 'nested-pw' } } }, 'store request');
    expect(lines.join('')).not.toMatch(/hunter2|sk-live-123|bearer-456|header-key-789|top-level-1|top-level-2|child-pw|nested-pw/);
    const [first, second, third] = parsed();
    expect(third).toMatchObject({ store: { name: 'pg', config: { host: 'db', password: '[Redacted]' } } });
    expect(first).toMatchObject({
      msg: 'store created',
      store: { name: 'orders', password: '[Redacted]' },
      secret: { name: 'OPENAI_API_KEY', value: '[Redacted]' },
      req: { method: 'GET', headers: { host: 'h', authorization: '[Redacted]', 'x-api-key': '[Redacted]' } },
      authorization: '[Redacted]',
      'x-api-key': '[Redacted]',
    });
    expect(second).toMatchObject({ part: 'stores', msg: 'connect failed', config: { host: 'db', password: '[Redacted]' } });
  });

  it('leaves every other field of a line as it was', () => {
    const { logger, parsed } = capture();
    logger.info({ sandbox: 'web', uuid: 'u-1', pooled: false }, 'sandbox created');
    logger.warn({ err: new Error('engine away'), container: 'c1', attempts: 3 }, 'could not remove');
    logger.debug({ hidden: true }, 'below the level');
    const [created, warned, ...rest] = parsed();
    expect(created).toMatchObject({ level: 30, service: 'sandboxd', sandbox: 'web', uuid: 'u-1', pooled: false, msg: 'sandbox created' });
    expect(warned).toMatchObject({ level: 40, container: 'c1', attempts: 3, err: { type: 'Error', message: 'engine away' } });
    expect(rest).toEqual([]);
  });
});
