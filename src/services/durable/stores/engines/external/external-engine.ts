import { checkExternalConfig, resolveEndpoint, type Endpoint, type ExternalEngineOptions, type ExternalSpec } from './external-config.js';
import { cannotConnect } from './external-errors.js';
import type { StoreEngine, StoreHandle, StoreKind, StoreOp, StoreTarget } from '../../store-engine.js';

/**
 * What the SQL server engines (postgres, mysql) share: the config checked against their spec,
 * the endpoint resolved from it (or from the bound sandbox), the one connection a validated
 * create makes, and nothing to destroy (an external store's data belongs to its server).
 */
export abstract class ExternalSqlEngine implements StoreEngine {
  abstract readonly kind: StoreKind;
  readonly ops: readonly StoreOp[] = ['query', 'execute'];

  constructor(
    private readonly spec: ExternalSpec,
    protected readonly options: ExternalEngineOptions = {},
  ) {}

  checkConfig(config: Record<string, unknown>): Record<string, unknown> {
    return checkExternalConfig(this.spec, config);
  }

  async open(target: StoreTarget): Promise<StoreHandle> {
    return this.handleFor(target.name, resolveEndpoint(this.spec, target));
  }

  async prepare(target: StoreTarget, validate: boolean): Promise<void> {
    const endpoint = resolveEndpoint(this.spec, target);
    if (!validate) return;
    try {
      await this.ping(endpoint);
    } catch (err) {
      throw cannotConnect(this.spec.kind, endpoint, err);
    }
  }

  async destroy(): Promise<void> {
    // An external store's data belongs to its server; forgetting the record touches nothing there.
  }

  /** A handle of the store `name` at `endpoint` (its pool opens on first use). */
  protected abstract handleFor(name: string, endpoint: Endpoint): StoreHandle;

  /** Connects once and runs `SELECT 1`; throws the driver's error. */
  protected abstract ping(endpoint: Endpoint): Promise<void>;
}
