import type { ExecRequest, WorkerCall, WorkerRequest } from '../../src/backends/backend.js';
import { FakeBackend, type FakeCapability, type FakeExecScript, type FakeWorkerAnswer } from '../../src/backends/fake/fake-backend.js';
import { DEFAULT_IMAGE } from '../../src/images/catalog.js';
import { backendConformance, COMMANDS, WORKER } from './backend-conformance.js';

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

/** The fake's script for the suite's worker (WORKER), answered as the sh script would. */
function answerLikeTheWorker(_key: string, request: WorkerRequest, call: WorkerCall): FakeWorkerAnswer {
  if (JSON.stringify(request.command) !== JSON.stringify(WORKER)) return { exit_code: 127, stderr: `${request.command[0]}: not the suite's worker\n` };
  const space = call.line.indexOf(' ');
  const [nonce, rest] = space < 0 ? [call.line, call.line] : [call.line.slice(0, space), call.line.slice(space + 1)];
  if (rest.startsWith('exit ')) return { exit_code: Number(rest.slice('exit '.length)) };
  if (rest === 'garbage') return 'not an answer';
  if (rest === 'hang') return { hang: true };
  if (rest.startsWith('stderr ')) return { line: `${nonce} ok`, stderr: `${rest.slice('stderr '.length)}\n` };
  if (rest.startsWith('env ')) return `${nonce} ${request.env?.[rest.slice('env '.length)] ?? ''}`;
  return `${nonce} echo:${rest}`;
}

const fakeSubject = (title: string, capabilities: FakeCapability[]) => ({
  title,
  make: async () => {
    const fake = new FakeBackend({ capabilities });
    fake.onExec = answerLikeAShell;
    fake.scriptWorker(answerLikeTheWorker);
    return fake;
  },
  image: DEFAULT_IMAGE,
  missingImage: 'sandboxd-test/missing:latest',
  imageTag: (name: string) => `sandboxd-conformance:${name}`,
  relayImage: { skip: 'the fake has no browser relay: it cannot reach a real port' },
  cleanup: async () => undefined,
});

backendConformance(fakeSubject('fake, every capability it can have', ['snapshots', 'archive', 'resize', 'poolClaim', 'detached', 'reuse', 'workers', 'ports']));
backendConformance(fakeSubject('fake, no capability', []));
