import type { Tool } from '../tool.js';
import { browserTools } from './browser-tools.js';
import { detachedTools } from './detached-tools.js';
import { execTools } from './exec-tools.js';
import { fileTools } from './file-tools.js';
import { lifecycleTools } from './lifecycle-tools.js';
import { llmTools } from './llm-tools.js';
import { objectTools } from './object-tools.js';
import { permissionTools } from './permission-tools.js';
import { proxyTools } from './proxy-tools.js';
import { orchestrationTools } from './orchestration-tools.js';
import { sandboxTools } from './sandbox-tools.js';
import { scheduleTools } from './schedule-tools.js';
import { snapshotTools } from './snapshot-tools.js';
import { storeTools } from './store-tools.js';

/** Every tool the MCP server offers, one family per file; a new family is one more entry. */
export const TOOL_FAMILIES: readonly (readonly Tool[])[] = [
  sandboxTools,
  execTools,
  detachedTools,
  fileTools,
  lifecycleTools,
  snapshotTools,
  browserTools,
  objectTools,
  scheduleTools,
  storeTools,
  llmTools,
  permissionTools,
  proxyTools,
  orchestrationTools,
];
