/**
 * The kinds a durable store can have (docs/decisions.md, "Durable stores"). Here rather than in
 * the engine contract so that the state and schema layers, which may not import services/,
 * spell them the same way.
 */
export const STORE_KINDS = ['sqlite', 'kv', 'queue', 'postgres', 'mysql', 'redis'] as const;
export type StoreKind = (typeof STORE_KINDS)[number];

/** Kinds whose data lives on the host, under the data directory (or, for sqlite, in a bound sandbox). */
export const EMBEDDED_STORE_KINDS: readonly StoreKind[] = ['sqlite', 'kv', 'queue'];
