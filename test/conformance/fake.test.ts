import type { ExecRequest } from '../../src/backends/backend.js';
import { FakeBackend, type FakeCapability, type FakeExecScript } from '../../src/backends/fake/fake-backend.js';
import { DEFAULT_IMAGE } from '../../src/images/catalog.js';
import { backendConformance, COMMANDS } from './backend-conformance.js';

/**
 * The fake's script for the suite's commands (COMMANDS), answered as a shell would run them;
 * anything else is "command not found". It makes the fake's exec contract (exit codes, streams,
 * stdin, env, timeouts, aborts, the output cap) checkable by the same cases as a real backend's.
 */
function answerLikeAShell(request: ExecRequest, spec: { env: Record<string, string> }): FakeExecScript {
  const [program, ...args] = request.command;
  if (program === 'sh' && args[1] === COMMANDS.print('', '', 0)[2] && args[2] === 'print') {
    return { chunks: [{ stream: 'stdout', text: args[3]! }, { stream: 'stderr', text: args[4]! }], exit_code: Number(args[5]) };
  }
  if (program === 'cat') return { chunks: [{ stream: 'stdout', text: request.stdin?.toString('utf8') ?? '' }] };
  if (program === 'printenv') {
    const value = request.env?.[args[0]!] ?? spec.env[args[0]!];
    return value === undefined ? { exit_code: 1 } : { chunks: [{ stream: 'stdout', text: `${value}\n` }] };
  }
  if (program === 'sleep') return { hang: true };
  if (program === 'true') return {};
  return { chunks: [{ stream: 'stderr', text: `${program}: command not found\n` }], exit_code: 127 };
}

const fakeSubject = (title: string, capabilities: FakeCapability[]) => ({
  title,
  make: async () => {
    const fake = new FakeBackend({ capabilities });
    fake.onExec = answerLikeAShell;
    return fake;
  },
  image: DEFAULT_IMAGE,
  missingImage: 'sandboxd-test/missing:latest',
  imageTag: (name: string) => `sandboxd-conformance:${name}`,
  relayImage: { skip: 'the fake has no browser relay: it cannot reach a real port' },
  cleanup: async () => undefined,
});

backendConformance(fakeSubject('fake, every capability it can have', ['snapshots', 'archive', 'resize', 'poolClaim', 'detached', 'reuse']));
backendConformance(fakeSubject('fake, no capability', []));
