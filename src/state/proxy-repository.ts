import type { Selectable } from 'kysely';
import type { ProxyHookTable, SandboxSecretTable } from './schema.js';
import type { Statements } from './store.js';

/** A stored hook: `match` and `target` are JSON text. */
export type ProxyHookRow = Omit<Selectable<ProxyHookTable>, 'id'>;
/** A stored sandbox secret: `secret` is ciphertext. */
export type SandboxSecretRow = SandboxSecretTable;

/**
 * Proxy hooks and sandbox secrets in the state store. Synchronous prepared statements: the
 * proxy reads both on the request path (hooks once per change, secrets once per sandbox).
 */
export class ProxyRepository {
  constructor(private readonly statements: Statements) {}

  /** Every hook in creation order. */
  hooks(): ProxyHookRow[] {
    return this.statements.get('select "name", "event", "match", "target", "created_at" from "proxy_hooks" order by "id"').all() as ProxyHookRow[];
  }

  /** False when the name is taken. */
  insertHook(row: ProxyHookRow): boolean {
    const result = this.statements
      .get('insert into "proxy_hooks" ("name", "event", "match", "target", "created_at") values (?, ?, ?, ?, ?) on conflict ("name") do nothing')
      .run(row.name, row.event, row.match, row.target, row.created_at);
    return result.changes === 1;
  }

  /** False when there was no such hook. */
  deleteHook(name: string): boolean {
    return this.statements.get('delete from "proxy_hooks" where "name" = ?').run(name).changes === 1;
  }

  /** A sandbox's secrets (ciphertext). */
  secrets(sandboxUuid: string): SandboxSecretRow[] {
    return this.statements.get('select * from "sandbox_secrets" where "sandbox_uuid" = ? order by "name"').all(sandboxUuid) as SandboxSecretRow[];
  }

  /** Stores a sandbox's secrets in one transaction. */
  putSecrets(rows: SandboxSecretRow[]): void {
    this.statements.transaction(() => {
      for (const row of rows) {
        this.statements
          .get('insert or replace into "sandbox_secrets" ("sandbox_uuid", "name", "host", "placeholder", "secret", "intercept_tls") values (?, ?, ?, ?, ?, ?)')
          .run(row.sandbox_uuid, row.name, row.host, row.placeholder, row.secret, row.intercept_tls);
      }
    });
  }

  deleteSecrets(sandboxUuid: string): void {
    this.statements.get('delete from "sandbox_secrets" where "sandbox_uuid" = ?').run(sandboxUuid);
  }

  /** The egress proxy's CA (its key sealed), if one was made. */
  egressCa(): { cert: string; key: string } | undefined {
    return this.statements.get('select "cert", "key" from "egress_ca" where "id" = 1').get() as { cert: string; key: string } | undefined;
  }

  /** Keeps the CA unless one is kept already (the first one made wins). */
  putEgressCa(row: { cert: string; key: string; created_at: string }): void {
    this.statements.get('insert into "egress_ca" ("id", "cert", "key", "created_at") values (1, ?, ?, ?) on conflict ("id") do nothing').run(row.cert, row.key, row.created_at);
  }
}
