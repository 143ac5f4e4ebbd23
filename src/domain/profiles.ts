/**
 * Domain types every layer shares (state, schemas, config, services, backends). They live
 * here rather than in a backend file, so that only services/ and backends/ import backends/.
 */

/** The security profiles of a sandbox, least isolated first (docs/decisions.md, "Security profiles"). */
export const PROFILES = ['permissive', 'moderate', 'restrictive'] as const;
export type Profile = (typeof PROFILES)[number];
