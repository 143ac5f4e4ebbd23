/**
 * The bounds of `disk_mb`, what one sandbox may write over all its writable paths
 * (docs/decisions.md, "Disk quota").
 */

/** A sandbox's disk_mb when its request gives none (and every pool instance's), where the storage holds it. */
export const DEFAULT_DISK_MB = 10_240;
/** The least disk_mb a request may give: enough for the writable paths' shares to hold anything. */
export const MIN_DISK_MB = 64;
/** The most disk_mb a request may give anywhere (1 TiB); the engine's storage size bounds it further. */
export const MAX_DISK_MB = 1_048_576;
