import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { execBody, type ExecResultBody } from '../../schemas/exec-schemas.js';
import { batchBody, runBody, type BatchRunResult } from '../../schemas/run-schemas.js';
import { apiPath } from '../../client/api-client.js';
import { defineTool, type Tool } from '../tool.js';
import { sandboxName } from './arguments.js';
import { execWithProgress } from './exec-progress.js';

const RESULT =
  'Returns two text blocks: first exit_code and duration_ms (a non-zero exit_code is the command\'s verdict, not a tool ' +
  'failure; exit_code 124 with "timed out" means the process tree was killed at timeout_ms), then the output, stdout and ' +
  'stderr interleaved as they arrived. Output over 16 KB shows its first and last 8 KB around a marker that names the ' +
  'bytes left out: redirect big output to a file and read parts of it.';

/** Commands: in a persistent sandbox, or once in a fresh one. */
export const execTools: Tool[] = [
  defineTool({
    name: 'sandbox_exec',
    title: 'Run a command in a sandbox',
    description:
      'Run one command in a running sandbox (see sandbox_create) and wait for it. command is an argv array run without ' +
      'a shell: use ["bash", "-lc", "cd src && make 2>&1 | tail"] for pipes, redirection, && or globs. Runs as user ' +
      '"sandbox" in /workspace unless workdir or sudo say otherwise; files and installed packages persist for later calls. ' +
      'With a progressToken, progress notifications report the output as the command prints it. ' +
      RESULT,
    inputSchema: z.strictObject({ name: sandboxName, ...execBody.shape }),
    annotations: { destructiveHint: true, openWorldHint: true },
    handle: async ({ name, ...body }, { api, signal, progress }) => {
      const path = apiPath('sandboxes', name, 'exec');
      if (progress) return execResult(await execWithProgress(api, `${path}/stream`, body, progress, signal));
      return execResult(await api.request<ExecResultBody>({ method: 'POST', path, body }, signal));
    },
  }),

  defineTool({
    name: 'sandbox_run',
    title: 'Run a command once in a fresh sandbox',
    description:
      'Run one command in a pristine, throwaway sandbox: nothing persists and nothing leaks between runs. It takes a ' +
      'pre-started container that is reset and checked after every run (fast, the default: read-only root, /workspace, /tmp ' +
      'and HOME writable; fast: false makes a new sandbox, removed afterwards, which may also write elsewhere). ' +
      'Best for one-off commands such as ["python3", "-c", "print(6*7)"]; use sandbox_create and sandbox_exec when ' +
      'files or state must survive. command is an argv array run without a shell (["bash", "-lc", "..."] for shell syntax). ' +
      'image defaults to the server\'s default image (normally sandboxd/base:bookworm with bash, git, curl, python3); ' +
      'sandboxd/python:bookworm adds pip, sandboxd/node:bookworm adds Node.js and npm. ' +
      RESULT,
    inputSchema: z.strictObject(runBody.shape),
    annotations: { destructiveHint: false, openWorldHint: true },
    handle: async (body, { api, signal }) => execResult(await api.request<ExecResultBody>({ method: 'POST', path: '/run', body }, signal)),
  }),

  defineTool({
    name: 'sandbox_run_batch',
    title: 'Run several commands at once, each in a fresh sandbox',
    description:
      'Run up to 100 independent commands in parallel, each in its own fresh throwaway sandbox (as sandbox_run does), so ' +
      'that one cannot see or break another. Each item takes the sandbox_run arguments, e.g. {"commands": [{"command": ' +
      '["python3", "-c", "print(1)"]}, {"command": ["node", "-e", "console.log(2)"]}]}. Returns a JSON array in input ' +
      'order of {output, error, exit_code}: error is null when the command ran (whatever its exit_code) and says why ' +
      'when it could not run.',
    inputSchema: z.strictObject(batchBody.shape),
    annotations: { destructiveHint: false, openWorldHint: true },
    handle: async (body, { api, signal }) => {
      const { results } = await api.request<BatchRunResult>({ method: 'POST', path: '/batch/run', body }, signal);
      return { content: [{ type: 'text', text: JSON.stringify(results, null, 2) }] };
    },
  }),
];

/** The exec reply as a status block and an output block (the server caps each block on its own). */
function execResult(result: ExecResultBody): CallToolResult {
  const status = [`exit_code: ${result.exit_code}`, `duration_ms: ${result.duration_ms}`];
  if (result.timed_out) status.push('timed out: the process tree was killed; raise timeout_ms if it needs longer');
  if (result.truncated) status.push('truncated: output past the server\'s limit was dropped');
  if (!result.output) status.push('output: (none)');
  return {
    content: [
      { type: 'text', text: status.join('\n') },
      ...(result.output ? [{ type: 'text' as const, text: result.output }] : []),
    ],
  };
}
