#!/usr/bin/env node
import { CommanderError } from 'commander';
import { clientContext } from './client/client-context.js';
import { extractGlobalFlags } from './client/global-flags.js';
import { reportFailure } from './client/output.js';
import { cliProgram } from './program.js';

let parsed;
try {
  parsed = extractGlobalFlags(process.argv.slice(2));
} catch (err) {
  reportFailure(err);
  process.exit();
}
const ctx = clientContext(parsed.flags);
// A reader that stops early (`sandboxd sandbox ls | head -1`) closes the pipe: end quietly, as Unix tools do.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code !== 'EPIPE') throw err;
  process.exit(process.exitCode ?? 0);
});

// A usage error (unknown command or option, a missing argument) exits 2; help and --version exit 0.
try {
  await cliProgram(ctx).parseAsync(parsed.args, { from: 'user' });
} catch (err) {
  if (!(err instanceof CommanderError)) throw err;
  process.exitCode = err.exitCode === 0 ? 0 : 2;
}
