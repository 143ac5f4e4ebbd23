import { generatedBlocks } from './markers.js';

/** A route named in the first cell of a hand-written table row, and where. */
export interface RouteMention {
  /** `METHOD /path` with every path parameter written `{}`. */
  route: string;
  file: string;
  line: number;
}

/** `GET /sandboxes/{name}` or `GET/DELETE /schedules/{id}` in a code span. */
const MENTION = /`((?:GET|POST|PUT|PATCH|DELETE|OPTIONS)(?:\/(?:GET|POST|PUT|PATCH|DELETE|OPTIONS))*) (\/[^`\s?]*)[^`]*`/g;

/** A route with its parameters' names and any query string dropped, so that spellings compare. */
export const routeKey = (method: string, path: string): string => `${method} ${path.split('?')[0]!.replace(/\{[^}]*\}/g, '{}')}`;

/** The first cell of a route table's header: such a table describes one route or more per row. */
const ROUTE_TABLE_HEADERS = new Set(['method and path', 'route']);

const firstCell = (row: string): string => (row.slice(1).split(/(?<!\\)\|/)[0] ?? '').trim();

/**
 * The routes a document's route tables describe: every `METHOD /path` in the first cell of a row
 * of a table whose header starts with "method and path" or "route", outside the generated blocks.
 */
export function routeMentions(text: string, file: string): RouteMention[] {
  let hand = text;
  for (const block of generatedBlocks(text)) hand = hand.replace(block.body, block.body.replace(/[^\n]/g, ' '));
  const lines = hand.split('\n');
  let inRouteTable = false;
  return lines.flatMap((row, index) => {
    if (!row.startsWith('|')) {
      inRouteTable = false;
      return [];
    }
    if (index === 0 || !lines[index - 1]!.startsWith('|')) {
      inRouteTable = ROUTE_TABLE_HEADERS.has(firstCell(row));
      return [];
    }
    if (!inRouteTable) return [];
    return [...firstCell(row).matchAll(MENTION)].flatMap((match) =>
      match[1]!.split('/').map((method) => ({ route: routeKey(method, match[2]!), file, line: index + 1 })),
    );
  });
}
