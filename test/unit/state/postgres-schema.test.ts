import Sqlite from 'better-sqlite3';
import { Kysely, SqliteDialect, sql } from 'kysely';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allMigrations } from '../../../src/services/domains.js';
import { applyMigrations } from '../../../src/state/migration-state.js';
import { postgresKysely, postgresPool } from '../../../src/state/postgres.js';

/** The PostgreSQL server of these machines (trust auth on 127.0.0.1:5432); the test makes its own database. */
const SERVER = 'postgres://postgres@127.0.0.1:5432';
const database = `sandboxd_schema_${randomBytes(4).toString('hex')}`;
const admin = new pg.Pool({ connectionString: `${SERVER}/postgres`, max: 1 });
const pool = postgresPool(`${SERVER}/${database}`);
const db = postgresKysely<any>(pool);
const sqlite = new Kysely<any>({ dialect: new SqliteDialect({ database: new Sqlite(':memory:') }) });

beforeAll(async () => {
  await admin.query(`CREATE DATABASE ${database}`);
});
afterAll(async () => {
  await db.destroy();
  await sqlite.destroy();
  await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  await admin.end();
});

/** Every table's columns as `name type null|not null`, one engine's type names mapped to SQLite's. */
type Schema = Record<string, string[]>;

async function sqliteSchema(): Promise<Schema> {
  const tables = await sql<{ name: string }>`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`.execute(sqlite);
  const schema: Schema = {};
  for (const { name } of tables.rows) {
    const columns = await sql<{ name: string; type: string; notnull: number; pk: number }>`SELECT * FROM pragma_table_info(${name})`.execute(sqlite);
    schema[name] = columns.rows.map((c) => `${c.name} ${c.type.toLowerCase()} ${c.notnull || c.pk ? 'not null' : 'null'}`);
  }
  return schema;
}

const POSTGRES_TYPES: Record<string, string> = { bigint: 'integer', integer: 'integer', text: 'text', bytea: 'blob', 'character varying': 'varchar(255)' };

async function postgresSchema(): Promise<Schema> {
  const columns = await sql<{ table_name: string; column_name: string; data_type: string; is_nullable: string }>`
    SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns
    WHERE table_schema = 'public' ORDER BY table_name, ordinal_position`.execute(db);
  const schema: Schema = {};
  for (const c of columns.rows) {
    (schema[c.table_name] ??= []).push(`${c.column_name} ${POSTGRES_TYPES[c.data_type] ?? c.data_type} ${c.is_nullable === 'YES' ? 'null' : 'not null'}`);
  }
  return schema;
}

describe('the migrations on PostgreSQL (one history for both engines)', () => {
  it('all apply to an empty database, then none is pending', async () => {
    const names = Object.keys(allMigrations()).sort();
    expect(await applyMigrations(db, allMigrations(), database)).toEqual(names);
    expect(await applyMigrations(db, allMigrations(), database)).toEqual([]);
  });

  it('make the tables and columns they make on SQLite, in the same order, with the same nullability', async () => {
    await applyMigrations(sqlite, allMigrations(), ':memory:');
    const [onSqlite, onPostgres] = [await sqliteSchema(), await postgresSchema()];
    expect(Object.keys(onPostgres).sort()).toEqual(Object.keys(onSqlite).sort());
    expect(Object.keys(onSqlite).length).toBeGreaterThan(30);
    for (const table of Object.keys(onSqlite)) expect({ table, columns: onPostgres[table] }).toEqual({ table, columns: onSqlite[table] });
  });

  it('makes the same indexes', async () => {
    const onSqlite = await sql<{ name: string }>`SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY name`.execute(sqlite);
    // The indexes behind primary keys and unique constraints are the constraints' own on both (SQLite's sqlite_autoindex_*, left out above).
    const onPostgres = await sql<{ indexname: string }>`
      SELECT indexname FROM pg_indexes WHERE schemaname = 'public' AND indexname NOT IN (SELECT conname FROM pg_constraint) ORDER BY indexname`.execute(db);
    expect(onPostgres.rows.map((r) => r.indexname)).toEqual(onSqlite.rows.map((r) => r.name));
  });

  it('gives autoincrement ids that increase and are not reused, integers past 2^31 as numbers, and bytes as bytes', async () => {
    const audit = (event: string) =>
      db.insertInto('audit_log').values({ timestamp: new Date().toISOString(), event, sandbox: 's' }).returning('id').executeTakeFirstOrThrow();
    const first = await audit('a');
    await db.deleteFrom('audit_log').where('id', '=', first.id).execute();
    const second = await audit('b');
    expect(typeof second.id).toBe('number');
    expect(second.id).toBeGreaterThan(first.id);

    const big = 2 ** 40 + 3;
    await db.insertInto('llm_budgets').values({ sandbox_uuid: 'u', budget_tokens: big }).execute();
    const budget = await db.selectFrom('llm_budgets').selectAll().where('sandbox_uuid', '=', 'u').executeTakeFirstOrThrow();
    expect(budget.budget_tokens).toBe(big);
    const counted = await db.selectFrom('audit_log').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow();
    expect(counted.n).toBe(1);

    const content = randomBytes(64);
    await db.insertInto('detached_outputs').values({ command_id: 'c', stream: 'stdout', start: 0, content }).execute();
    const output = await db.selectFrom('detached_outputs').select('content').executeTakeFirstOrThrow();
    expect(Buffer.compare(output.content, content)).toBe(0);
  });
});
