import type { Selectable } from 'kysely';
import type { ProxyHookTable, SandboxSecretTable } from './schema.js';
import type { Sql } from './sql.js';

/** A stored hook: `match` and `target` are JSON text. */
export type ProxyHookRow = Omit<Selectable<ProxyHookTable>, 'id'>;
/** A stored sandbox secret: `secret` is ciphertext. */
export type SandboxSecretRow = SandboxSecretTable;

/**
 * Proxy hooks, sandbox secrets and the proxy's decision log in the state store, as prepared
 * statements: the proxy reads hooks once per change and secrets once per sandbox, and writes a
 * decision per request.
 */
export class ProxyRepository {
  constructor(private readonly sql: Sql) {}

  /** Every hook in creation order. */
  hooks(): Promise<ProxyHookRow[]> {
    return this.sql.all('select "name", "event", "match", "target", "created_at" from "proxy_hooks" order by "id"');
  }

  /** False when the name is taken. */
  async insertHook(row: ProxyHookRow): Promise<boolean> {
    const inserted = await this.sql.run('insert into "proxy_hooks" ("name", "event", "match", "target", "created_at") values (?, ?, ?, ?, ?) on conflict ("name") do nothing', [
      row.name,
      row.event,
      row.match,
      row.target,
      row.created_at,
    ]);
    return inserted === 1;
  }

  /** False when there was no such hook. */
  async deleteHook(name: string): Promise<boolean> {
    return (await this.sql.run('delete from "proxy_hooks" where "name" = ?', [name])) === 1;
  }

  /** Keeps a decision of the proxy (its entry as JSON) and returns its id, which grows. */
  async addDecision(sandbox: string, entry: string): Promise<number> {
    const row = await this.sql.first<{ id: number }>('insert into "proxy_decisions" ("sandbox", "entry") values (?, ?) returning "id"', [sandbox, entry]);
    return Number(row?.id);
  }

  /** Drops the decisions up to this id. */
  async pruneDecisions(throughId: number): Promise<void> {
    await this.sql.run('delete from "proxy_decisions" where "id" <= ?', [throughId]);
  }

  /** The newest decisions first (entries as JSON), of one sandbox when given. */
  async decisions(limit: number, sandbox?: string): Promise<string[]> {
    const rows =
      sandbox === undefined
        ? await this.sql.all<{ entry: string }>('select "entry" from "proxy_decisions" order by "id" desc limit ?', [limit])
        : await this.sql.all<{ entry: string }>('select "entry" from "proxy_decisions" where "sandbox" = ? order by "id" desc limit ?', [sandbox, limit]);
    return rows.map((row) => row.entry);
  }

  /** A sandbox's secrets (ciphertext). */
  secrets(sandboxUuid: string): Promise<SandboxSecretRow[]> {
    return this.sql.all('select * from "sandbox_secrets" where "sandbox_uuid" = ? order by "name"', [sandboxUuid]);
  }

  /** Stores a sandbox's secrets in one transaction, replacing ones of the same names. */
  async putSecrets(rows: SandboxSecretRow[]): Promise<void> {
    await this.sql.transaction(async (tx) => {
      for (const row of rows) {
        await tx.run(
          'insert into "sandbox_secrets" ("sandbox_uuid", "name", "host", "placeholder", "secret", "intercept_tls") values (?, ?, ?, ?, ?, ?) ' +
            'on conflict ("sandbox_uuid", "name") do update set "host" = excluded."host", "placeholder" = excluded."placeholder", "secret" = excluded."secret", "intercept_tls" = excluded."intercept_tls"',
          [row.sandbox_uuid, row.name, row.host, row.placeholder, row.secret, row.intercept_tls],
        );
      }
    });
  }

  async deleteSecrets(sandboxUuid: string): Promise<void> {
    await this.sql.run('delete from "sandbox_secrets" where "sandbox_uuid" = ?', [sandboxUuid]);
  }

  /** The egress proxy's CA (its key sealed), if one was made. */
  egressCa(): Promise<{ cert: string; key: string } | undefined> {
    return this.sql.first('select "cert", "key" from "egress_ca" where "id" = 1');
  }

  /** Keeps the CA unless one is kept already (the first one made wins). */
  async putEgressCa(row: { cert: string; key: string; created_at: string }): Promise<void> {
    await this.sql.run('insert into "egress_ca" ("id", "cert", "key", "created_at") values (1, ?, ?, ?) on conflict ("id") do nothing', [row.cert, row.key, row.created_at]);
  }
}
