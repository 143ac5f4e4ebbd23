import { z } from 'zod';
import type { NextStep } from '../errors.js';

const sandbox = z.string().meta({ description: 'Sandbox name' });
const page = z.string().meta({ description: 'Browser page name' });
const store = z.string().meta({ description: 'Store name' });

/** A next step on the wire: the `hint` of an error envelope (src/errors.ts `NextStep`). */
export const nextStep = z
  .discriminatedUnion('action', [
    z.object({ action: z.literal('start'), sandbox }),
    z.object({
      action: z.literal('recover'),
      sandbox,
      then: z.literal('start').optional().meta({ description: "'start': start it after recovering; absent: recover, then repeat the call" }),
    }),
    z.object({ action: z.literal('browser_open'), sandbox, page }),
    z.object({
      action: z.literal('browser_snapshot'),
      sandbox,
      page,
      use_refs: z.boolean().optional().meta({ description: "Use the new snapshot's refs in the next click or fill" }),
    }),
    z.object({ action: z.literal('list_directory'), sandbox, path: z.string().meta({ description: 'The directory, absolute' }) }),
    z.object({ action: z.literal('list_images') }),
    z.object({ action: z.literal('create_volume'), volume: z.string().meta({ description: 'Volume name' }) }),
    z.object({ action: z.literal('store_execute'), store: store.optional() }),
    z.object({ action: z.literal('store_ops'), store, ops: z.array(z.string()).meta({ description: "The ops the store's kind answers: query, execute, command" }) }),
    z.object({ action: z.literal('register_class'), class: z.string().meta({ description: 'Object class name' }) }),
    z.object({ action: z.literal('delete_proxy_hook'), hook: z.string().meta({ description: 'Proxy hook name' }) }),
    z.object({ action: z.literal('set_llm_key'), provider: z.string().optional().meta({ description: 'LLM provider name' }) }),
    z.object({ action: z.literal('mint_terminal_token'), sandbox }),
  ])
  .meta({
    id: 'NextStep',
    description:
      'What to do next, as data; `error` already says it in the words of this API (a route). ' +
      'Other faces (the MCP tools, the command line) say it in theirs after `problem`.',
  }) satisfies z.ZodType<NextStep>;

// The other direction: every NextStep the program can hold is one the wire schema describes.
const everyStepOnTheWire = (step: NextStep): z.infer<typeof nextStep> => step;
void everyStepOnTheWire;

/** The error envelope every failure is answered with (src/http/errors.ts). */
export const errorEnvelope = z
  .object({
    success: z.literal(false),
    error: z.string().meta({ description: 'What is wrong and, with a `hint`, what to do next (naming the route)' }),
    code: z.string().meta({ description: 'Machine-readable code from the error table, e.g. NOT_FOUND, CONFLICT' }),
    problem: z.string().optional().meta({ description: 'With `hint`: what is wrong, without the next step' }),
    hint: nextStep.optional(),
    details: z
      .record(z.string(), z.unknown())
      .optional()
      .meta({ description: 'Structured facts about the failure, e.g. the engine code of a SQL_ERROR' }),
  })
  .meta({ id: 'Error' });
