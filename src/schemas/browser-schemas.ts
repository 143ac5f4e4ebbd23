import { z } from 'zod';
import { resourceName, timestamp } from './common.js';

/** Browser routes answer with bare bodies (docs/decisions.md, "Transport"), never the `{success, data}` envelope. */

export const browserParams = z.object({ name: resourceName });
export const browserPageParams = z.object({
  name: resourceName,
  page: resourceName.meta({ description: 'Page name; `default` when the client has no need for several' }),
});

const ref = z.string().regex(/^[a-z]*\d+$/, 'must be a ref from a snapshot, such as e12').meta({ description: 'Ref from the latest snapshot, e.g. e12' });
const selector = z.string().min(1, 'must not be empty').meta({ description: 'CSS selector, used when no ref is given' });
const needsTarget = (body: { ref?: string | undefined; selector?: string | undefined }) => body.ref !== undefined || body.selector !== undefined;
const TARGET_MESSAGE = { message: 'give ref (from the latest snapshot) or selector (CSS)' };

export const gotoBody = z
  .strictObject({ url: z.url({ error: 'must be an absolute URL such as http://127.0.0.1:8000/' }) })
  .meta({ id: 'BrowserGoto' });

export const clickBody = z.strictObject({ ref: ref.optional(), selector: selector.optional() }).refine(needsTarget, TARGET_MESSAGE).meta({ id: 'BrowserClick' });

export const fillBody = z
  .strictObject({ value: z.string({ error: 'must be a string' }), ref: ref.optional(), selector: selector.optional() })
  .refine(needsTarget, TARGET_MESSAGE)
  .meta({ id: 'BrowserFill' });

export const evaluateBody = z
  .strictObject({ expression: z.string({ error: 'must be a string' }).min(1, 'must not be empty').meta({ description: 'JavaScript expression evaluated in the page' }) })
  .meta({ id: 'BrowserEvaluate' });

export const eventsQuery = z.object({
  offset: z.coerce.number().int().min(0).default(0).meta({ description: 'First sequence number to return' }),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
});

export const pageSnapshot = z
  .object({
    snapshot: z.string().meta({ description: 'YAML accessibility (ARIA) tree; interactive elements carry [ref=eN]' }),
    url: z.string(),
    title: z.string(),
    refs: z.array(z.string()).meta({ description: 'Ref IDs in the snapshot' }),
  })
  .meta({ id: 'PageSnapshot' });

export const pageSummary = z.object({ name: z.string(), url: z.string(), title: z.string() }).meta({ id: 'BrowserPage' });

export const browserStatus = z
  .object({ version: z.string().meta({ description: 'Chromium version' }), pages: z.array(pageSummary) })
  .meta({ id: 'BrowserStatus' });

export const screenshot = z
  .object({ data: z.string().meta({ description: 'PNG, base64' }), mime_type: z.literal('image/png'), width: z.int(), height: z.int() })
  .meta({ id: 'BrowserScreenshot' });

export const evaluation = z.object({ result: z.unknown().meta({ description: 'The value, as JSON (undefined becomes null)' }) }).meta({ id: 'BrowserEvaluation' });

export const pageContent = z
  .object({
    url: z.string(),
    title: z.string(),
    text: z.string().meta({ description: 'Visible text of the body' }),
    links: z.array(z.object({ text: z.string(), href: z.string() })),
  })
  .meta({ id: 'BrowserContent' });

export const pageClosed = z.object({ page: z.string(), closed: z.literal(true) }).meta({ id: 'BrowserPageClosed' });

export const browserEvent = z
  .object({ seq: z.int().meta({ description: 'Monotonic per sandbox, from 0' }), type: z.string(), page: z.string(), ts: timestamp })
  .meta({ id: 'BrowserEvent' });

export type Target = { ref?: string | undefined; selector?: string | undefined };
export type PageSnapshot = z.infer<typeof pageSnapshot>;
export type PageSummary = z.infer<typeof pageSummary>;
