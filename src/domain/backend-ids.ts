/**
 * The isolation backends sandboxd can run on, by id. The config schema accepts these ids and
 * backends/registry.ts must have an entry for each (the compiler checks both).
 */
export const BACKEND_IDS = ['docker', 'fake'] as const;
export type BackendId = (typeof BACKEND_IDS)[number];
