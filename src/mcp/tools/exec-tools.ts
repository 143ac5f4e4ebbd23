import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { execBody, type ExecResultBody } from '../../schemas/exec-schemas.js';
import { MAX_BATCH_COMMANDS, runBody, type BatchRunResult } from '../../schemas/run-schemas.js';
import { DEFAULT_IMAGE } from '../../images/catalog.js';
import { DEFAULT_IMAGE_DETECTION } from '../../images/image-detection.js';
import { apiPath } from '../../client/api-client.js';
import { defineTool, type Tool } from '../tool.js';
import { sandboxName, shellCommand } from './arguments.js';
import { execWithProgress } from './exec-progress.js';

/** What exec and run tools answer. */
const EXEC_RESULT =
  'Returns two text blocks: exit_code and duration_ms (a non-zero exit_code is the command\'s verdict, not a tool failure; ' +
  '124 with "timed out": killed at timeout_ms), then stdout and stderr interleaved. Output over 16 KB shows its first and ' +
  'last 8 KB: redirect big output to a file and read parts of it.';

/** The run and exec request fields with `command` in either form (argv, or a string run with sh -c). */
const runArguments = runBody.extend({
  command: shellCommand,
  image: runBody.shape.image.meta({ description: 'Container image; without it, picked from the command as sandbox_run says' }),
});

/** Which image a run that names none gets, from the detection table's defaults, grouped by image. */
function imageChoice(): string {
  const programs = new Map<string, string[]>();
  for (const [program, image] of Object.entries(DEFAULT_IMAGE_DETECTION)) programs.set(image, [...(programs.get(image) ?? []), program]);
  const rules = [...programs].map(([image, names]) =>
    image === DEFAULT_IMAGE ? `${names.join(', ')}, a string command -> ${image} (bash, git, curl, python3; no pip, no node)` : `${names.join(', ')} -> ${image}`,
  );
  return `Without image, argv[0] picks it: ${rules.join('; ')}; others -> the server's default image. `;
}

/** Commands: in a persistent sandbox, or once in a fresh one. */
export const execTools: Tool[] = [
  defineTool({
    name: 'sandbox_exec',
    title: 'Run a command in a sandbox',
    description:
      'Run a command in a running sandbox (see sandbox_create) and wait for it, as user "sandbox" in /workspace unless ' +
      'workdir or sudo say otherwise; files and installed packages persist for later calls. With a progressToken, ' +
      'progress notifications carry the output as it is printed. ' +
      EXEC_RESULT,
    inputSchema: z.strictObject({ name: sandboxName, ...execBody.shape, command: shellCommand }),
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
      'Run a command once in a pristine, throwaway sandbox: nothing persists and nothing leaks between runs. Use ' +
      'sandbox_create and sandbox_exec when files or state must survive. ' +
      imageChoice() +
      EXEC_RESULT,
    inputSchema: runArguments,
    annotations: { destructiveHint: false, openWorldHint: true },
    handle: async (body, { api, signal }) => execResult(await api.request<ExecResultBody>({ method: 'POST', path: '/run', body }, signal)),
  }),

  defineTool({
    name: 'sandbox_run_batch',
    title: 'Run several commands at once, each in a fresh sandbox',
    description:
      'Run up to 100 independent commands in parallel, each in its own fresh sandbox as sandbox_run does, e.g. ' +
      '{"commands": [{"command": ["python3", "-c", "print(1)"]}, {"command": "node -e \'console.log(2)\'", "image": ' +
      '"sandboxd/node:bookworm"}]}. Returns a JSON array in input order of {output, error, exit_code}: error is null when ' +
      'the command ran (whatever its exit_code), else why it could not run.',
    inputSchema: z.strictObject({
      commands: z
        .array(runArguments)
        .min(1, 'must hold at least one command')
        .max(MAX_BATCH_COMMANDS, `at most ${MAX_BATCH_COMMANDS} commands per batch`),
    }),
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
