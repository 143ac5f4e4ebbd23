import { cliTable } from './cli-table.js';
import { errorCodesTable, metricsTable, nextStepsTable, optionsTable, toolsTable } from './code-tables.js';
import { fillGenerated, generatedBlocks } from './markers.js';
import { routesTable, servedRoutes } from './route-table.js';

/** The renderer of each generated block, by the NAME of its markers. */
export async function renderers(): Promise<Record<string, () => string>> {
  const routes = await servedRoutes();
  return {
    options: optionsTable,
    'mcp-tools': toolsTable,
    'error-codes': errorCodesTable,
    'next-steps': nextStepsTable,
    metrics: metricsTable,
    routes: () => routesTable(routes),
    'cli-commands': cliTable,
  };
}

/** A document with its generated blocks written anew; a block of an unknown name throws. */
export function regenerate(text: string, where: string, render: Record<string, () => string>): string {
  return fillGenerated(text, (name) => {
    const block = render[name];
    if (!block) throw new Error(`${where}: unknown generated block '${name}' (known: ${Object.keys(render).join(', ')})`);
    return block();
  });
}

/** The names of the generated blocks of a document. */
export const blockNames = (text: string): string[] => generatedBlocks(text).map((block) => block.name);
