import type { PoolKey, PooledInstance, TakenInstance } from './pool-types.js';

/** What the sandboxes and commands domains use of the warm pool (WarmPool implements it). */
export interface WarmPoolApi {
  /** A ready instance of the key, or one made for the taker now (a cold start). */
  take(key: PoolKey): TakenInstance;
  /** A ready instance of the key, if one waits. */
  takeReady(key: PoolKey): PooledInstance | undefined;
  /**
   * A container of `key` made for a create that found none ready: the key makes none ahead
   * until it is made, so that in a burst the engine serves the waiting creates first.
   */
  coldStart<T>(key: PoolKey, made: Promise<T>): Promise<T>;
  /** A claimed instance is a sandbox now: the pool lets go of it. */
  handOver(instance: PooledInstance): void;
  /** Gives back a taken instance that was not used (it is still pristine). */
  restore(instance: PooledInstance): void;
  /** Removes a taken instance in the background. */
  discard(instance: PooledInstance): void;
  /** Removes every instance of an image (it is being deleted) and stops making more. */
  forgetImage(image: string): Promise<void>;
}

/** What the commands and sandboxes domains use of the run pool (RunPool implements it). */
export interface RunPoolApi {
  /** Whether fast runs use this pool: the backend can reset an instance. */
  readonly enabled: boolean;
  take(key: PoolKey): TakenInstance;
  /** Gives an instance back after a run: reset and checked, or destroyed. */
  release(instance: PooledInstance): void;
  /** Destroys an instance that must not be used again. */
  drop(instance: PooledInstance): void;
  forgetImage(image: string): Promise<void>;
}
