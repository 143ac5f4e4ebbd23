/** The orchestration service around the pure interpreter (interpreter/index.ts): what services.ts wires. */
export { OrchestrationService, type InstanceView, type StartRequest } from './orchestration-service.js';
export { OrchestrationTimers } from './orchestration-timers.js';
export type { DefinitionView } from './definition-store.js';
