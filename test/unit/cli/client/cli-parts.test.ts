import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { sseEvents } from '../../../../src/client/sse-events.js';
import { extractGlobalFlags } from '../../../../src/cli/client/global-flags.js';
import { age, CLI_NEXT_STEPS, labelText, pairs, UsageError } from '../../../../src/cli/client/output.js';
import { withNextStep, type NextStep } from '../../../../src/errors.js';
import { prettyLine } from '../../../../src/telemetry/pretty-log.js';

describe('global flags of the client commands', () => {
  it('are taken out wherever they stand before --, in both spellings', () => {
    expect(extractGlobalFlags(['--json', 'sandbox', 'ls'])).toEqual({ args: ['sandbox', 'ls'], flags: { json: true }, client: true });
    expect(extractGlobalFlags(['sandbox', '--server', 'http://h:1', 'ls', '--api-key=k'])).toEqual({
      args: ['sandbox', 'ls'],
      flags: { json: false, server: 'http://h:1', apiKey: 'k' },
      client: true,
    });
    expect(extractGlobalFlags(['--server=http://h:1', 'exec', 'box', '--json', '--', 'cmd', '--json', '--server', 'x'])).toEqual({
      args: ['exec', 'box', '--', 'cmd', '--json', '--server', 'x'],
      flags: { json: true, server: 'http://h:1' },
      client: true,
    });
  });

  it('leave serve and mcp alone (their --api-key means something else)', () => {
    for (const args of [['serve', '--api-key', 'k'], ['mcp', '--server', 'u'], ['completion', 'bash'], ['--help'], []]) {
      expect(extractGlobalFlags(args)).toEqual({ args, flags: { json: false }, client: false });
    }
  });

  it('are taken by every command of the program but serve, mcp, completion and those on the data directory, under each of its names', async () => {
    const { cliProgram } = await import('../../../../src/cli/program.js');
    const { CLIENT_COMMANDS } = await import('../../../../src/cli/client/global-flags.js');
    const servers = ['serve', 'mcp', 'completion', 'migrate', 'backup', 'restore'];
    const names = cliProgram({} as never).commands.filter((command) => !servers.includes(command.name())).flatMap((command) => [command.name(), ...command.aliases()]);
    expect([...CLIENT_COMMANDS].sort()).toEqual(names.sort());
    for (const name of names) expect(extractGlobalFlags([name, '--json', 'x']), name).toMatchObject({ flags: { json: true }, client: true });
  });

  it('refuse a flag without its value, and --json with one', () => {
    expect(() => extractGlobalFlags(['sandbox', 'ls', '--server'])).toThrow(new UsageError('--server needs a value'));
    expect(() => extractGlobalFlags(['sandbox', 'ls', '--api-key', '--json'])).toThrow(new UsageError('--api-key needs a value'));
    expect(() => extractGlobalFlags(['sandbox', 'ls', '--server='])).toThrow(new UsageError('--server needs a value'));
    expect(() => extractGlobalFlags(['sandbox', 'ls', '--json=1'])).toThrow(new UsageError('--json takes no value'));
  });
});

describe('the server-sent events reader', () => {
  it('yields events split across chunks, joins data lines, skips comments and ends with the stream', async () => {
    const chunks = [': heartbeat\n\nid: 1\nevent: out', 'put\ndata: {"a":1}\n\n', 'event: done\r\ndata: x\r\ndata: y\r\n\r\n', 'data: unfinished'];
    const events = [];
    for await (const event of sseEvents(Readable.from(chunks))) events.push(event);
    expect(events).toEqual([
      { event: 'output', id: '1', data: '{"a":1}' },
      { event: 'done', data: 'x\ny' },
    ]);
  });
});

describe('the words of the command line', () => {
  const steps: [NextStep, string][] = [
    [{ action: 'start', sandbox: 'a' }, 'start it with `sandboxd sandbox start a`'],
    [{ action: 'recover', sandbox: 'a', then: 'start' }, 'recover it with `sandboxd sandbox recover a`, then start it with `sandboxd sandbox start a`'],
    [{ action: 'recover', sandbox: 'a' }, 'recover it first with `sandboxd sandbox recover a`'],
    [{ action: 'browser_open', sandbox: 'a', page: 'p' }, 'open it with POST /sandboxes/a/browser/pages/p/goto'],
    [{ action: 'browser_snapshot', sandbox: 'a', page: 'p', use_refs: true }, 'take a new snapshot (GET /sandboxes/a/browser/pages/p) and use its refs'],
    [{ action: 'list_directory', sandbox: 'a', path: '/w' }, 'list it with `sandboxd exec a -- ls -la /w` or GET /sandboxes/a/fs?path=/w'],
    [{ action: 'list_images' }, 'list the built images with `sandboxd images list`'],
    [{ action: 'create_volume', volume: 'cache' }, 'create it with `sandboxd volume create cache`'],
    [{ action: 'store_execute', store: 'notes' }, 'use `sandboxd store execute notes SQL`'],
    [{ action: 'store_ops', store: 'cache', ops: ['command'] }, 'it answers `sandboxd store command cache ...`'],
    [{ action: 'register_class', class: 'Counter' }, 'register it first with `sandboxd object class create Counter FILE`'],
    [{ action: 'set_llm_key', provider: 'openai' }, 'store the key with `sandboxd llm key set openai --stdin`'],
  ];
  it.each(steps)('render the next step %o as a command', (step, words) => {
    expect(withNextStep('it failed', step, CLI_NEXT_STEPS)).toBe(`it failed: ${words}`);
  });

  it('say ages, labels and KEY=VALUE pairs', () => {
    const now = Date.parse('2026-01-02T00:00:00Z');
    expect(['2026-01-01T23:59:30Z', '2026-01-01T23:30:00Z', '2026-01-01T20:00:00Z', '2025-12-20T00:00:00Z', undefined].map((t) => age(t, now))).toEqual(['30s', '30m', '4h', '13d', '-']);
    expect(labelText({ a: '1', b: '2' })).toBe('a=1,b=2');
    expect(labelText({})).toBe('-');
    expect(pairs(['A=1', 'B=x=y', 'C='], '--env')).toEqual({ A: '1', B: 'x=y', C: '' });
    expect(pairs(undefined, '--env')).toBeUndefined();
    expect(() => pairs(['=1'], '--env')).toThrow(new UsageError("--env '=1': expected KEY=VALUE"));
    expect(() => pairs(['novalue'], '--label')).toThrow(new UsageError("--label 'novalue': expected KEY=VALUE"));
  });
});

describe('readable log lines', () => {
  const record = (fields: object) => JSON.stringify({ level: 30, time: Date.parse('2026-01-02T03:04:05.678Z'), pid: 1, hostname: 'h', service: 'sandboxd', ...fields });

  it('put time, level and message first, then the fields; colours only when asked', () => {
    const line = prettyLine(record({ msg: 'sandboxd listening', url: 'http://x:1', auth: false, note: 'two words' }), false);
    expect(line).toBe('03:04:05.678 INFO  sandboxd listening url=http://x:1 auth=false note="two words"\n');
    const coloured = prettyLine(record({ level: 50, msg: 'bad' }), true);
    expect(coloured).toBe('\u001b[2m03:04:05.678\u001b[0m \u001b[31mERROR\u001b[0m bad\n');
  });

  it("indent an error's stack below its line, and pass a line that is not JSON as it is", () => {
    const line = prettyLine(record({ level: 50, msg: 'failed', err: { message: 'boom', stack: 'Error: boom\n    at x' } }), false);
    expect(line).toBe('03:04:05.678 ERROR failed\n    Error: boom\n        at x\n');
    expect(prettyLine('not json', false)).toBe('not json\n');
  });

  it('show nested fields as JSON, as the logger redacted them', () => {
    expect(prettyLine(record({ msg: 'store', store: { password: '[Redacted]' } }), false)).toContain('store={"password":"[Redacted]"}');
  });
});

describe('the command of exec and run', () => {
  it('starts at its first word, as in docker exec: its options are not sandboxd\'s', () => {
    expect(extractGlobalFlags(['exec', 'box', 'ls', '-la']).args).toEqual(['exec', 'box', '--', 'ls', '-la']);
    expect(extractGlobalFlags(['exec', '--workdir', '/tmp', '--sudo', 'box', 'ls', '--json']).args).toEqual(['exec', '--workdir', '/tmp', '--sudo', 'box', '--', 'ls', '--json']);
    expect(extractGlobalFlags(['--json', 'exec', 'box', 'sh', '-c', 'echo $0', '--server', 'x'])).toEqual({
      args: ['exec', 'box', '--', 'sh', '-c', 'echo $0', '--server', 'x'],
      flags: { json: true },
      client: true,
    });
    expect(extractGlobalFlags(['run', 'python3', '-c', 'print(1)']).args).toEqual(['run', '--', 'python3', '-c', 'print(1)']);
    expect(extractGlobalFlags(['run', '--image', 'sandboxd/python:bookworm', '--env=A=1', 'python3', '-V']).args).toEqual(['run', '--image', 'sandboxd/python:bookworm', '--env=A=1', '--', 'python3', '-V']);
  });

  it('leaves an explicit -- and the other commands as they are', () => {
    expect(extractGlobalFlags(['exec', 'box', '--', 'ls', '-la']).args).toEqual(['exec', 'box', '--', 'ls', '-la']);
    expect(extractGlobalFlags(['run', '--', 'ls']).args).toEqual(['run', '--', 'ls']);
    expect(extractGlobalFlags(['sandbox', 'ls', '--json']).args).toEqual(['sandbox', 'ls']);
    expect(extractGlobalFlags(['exec', 'box']).args).toEqual(['exec', 'box']);
  });

  it('knows every option of exec and run that takes a value', async () => {
    const { execCommands } = await import('../../../../src/cli/exec-command.js');
    const { COMMAND_STARTS } = await import('../../../../src/cli/client/global-flags.js');
    for (const command of execCommands({} as never)) {
      const withValue = command.options.filter((option) => option.required || option.optional).map((option) => option.long);
      expect([command.name(), [...(COMMAND_STARTS[command.name()]?.withValue ?? [])].sort()]).toEqual([command.name(), withValue.sort()]);
    }
  });
});
