import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { cliProgram } from '../../src/cli/program.js';

const UNIT = resolve(import.meta.dirname, '../../deploy/sandboxd.service');

describe('deploy/sandboxd.service', () => {
  it("is a unit systemd accepts, with no directive it ignores (systemd-analyze verify)", async () => {
    // verify exits 0 on a directive it cannot parse, saying so on stderr: both are checked.
    const { stderr } = await promisify(execFile)('systemd-analyze', ['verify', UNIT]);
    expect(stderr).toBe('');
  });

  it('runs commands and options this sandboxd has, and a data directory of its own', () => {
    const unit = readFileSync(UNIT, 'utf8');
    const commands = [...unit.matchAll(/^ExecStart(?:Pre)?=\/usr\/local\/bin\/sandboxd (\S+)(.*)$/gm)];
    expect(commands.map((match) => match[1])).toEqual(['migrate', 'serve']);
    const program = cliProgram({} as never);
    for (const [, name, args] of commands) {
      const command = program.commands.find((candidate) => candidate.name() === name);
      for (const flag of args?.match(/--[a-z-]+/g) ?? []) expect(command?.options.some((option) => option.long === flag), `${name} ${flag}`).toBe(true);
    }
    expect(unit).toMatch(/^Environment=SERVICE_DATA_DIR=\/var\/lib\/sandboxd$/m);
  });
});
