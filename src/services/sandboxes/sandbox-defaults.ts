import type { Profile } from '../../domain/profiles.js';

/** What a sandbox gets when its request does not say; pool instances are made with these. */
export const DEFAULT_LIMITS = { vcpus: 1, memory_mb: 512 } as const;
export const DEFAULT_PROFILE: Profile = 'moderate';
