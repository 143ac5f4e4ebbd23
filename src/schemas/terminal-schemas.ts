import { z } from 'zod';

const side = (name: string, fallback: number) =>
  z.coerce.number().int().min(1).max(1000).default(fallback).meta({ description: `The terminal's ${name} at start (1-1000)` });

/** The query of GET /sandboxes/{name}/pty. */
export const terminalQuery = z.strictObject({
  cols: side('columns', 80),
  rows: side('rows', 24),
  token: z.string().min(1).max(200).optional().meta({ description: 'A one-use token from POST /sandboxes/{name}/pty/token, for clients that cannot send the Authorization header (browsers)' }),
});

/** The answer of POST /sandboxes/{name}/pty/token. */
export const terminalToken = z
  .object({
    token: z.string().meta({ description: 'Pass as ?token= on GET /sandboxes/{name}/pty; valid once' }),
    expires_at: z.string().meta({ description: 'RFC 3339; 60 s after minting' }),
  })
  .meta({ id: 'TerminalToken' });

/** A client's control message on a terminal WebSocket (a text frame). */
export const terminalResize = z.strictObject({ type: z.literal('resize'), cols: z.number().int(), rows: z.number().int() });
