import type { InstanceState, Profile } from '../../backends/backend.js';

/** What a pooled instance is interchangeable by. */
export interface PoolKey {
  image: string;
  profile: Profile;
}

/** A key with its own size (`pool.sizes`); these keys are warmed at start. */
export interface PoolSize extends PoolKey {
  size: number;
}

/** A pristine running instance (role `pool`), handed out once by the warm pool, run after run by the run pool. */
export interface PooledInstance {
  name: string;
  uuid: string;
  key: PoolKey;
  state: InstanceState;
}

/**
 * A taken instance: ready at once when it was warm, else being made for its taker; or, warm and
 * without a name yet, the next one a reset under way gives back (RunPool).
 */
export interface TakenInstance {
  name?: string;
  warm: boolean;
  instance: Promise<PooledInstance>;
}

/** The id of a key in a pool's map. */
export const poolKeyId = (key: PoolKey): string => `${key.image}@${key.profile}`;
