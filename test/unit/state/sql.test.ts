import Sqlite from 'better-sqlite3';
import { sql as raw, type Kysely } from 'kysely';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { numberedPlaceholders, PostgresSql, postgresKysely, postgresPool } from '../../../src/state/postgres.js';
import { gatedSqlite, type Sql } from '../../../src/state/sql.js';

/** The PostgreSQL server of these machines (trust auth on 127.0.0.1:5432); the test makes its own database. */
const SERVER = 'postgres://postgres@127.0.0.1:5432';
const database = `sandboxd_sql_${randomBytes(4).toString('hex')}`;
const admin = new pg.Pool({ connectionString: `${SERVER}/postgres`, max: 1 });
let pool: pg.Pool;

const engines: { name: string; open: () => { sql: Sql; db: Kysely<any> } }[] = [
  { name: 'sqlite', open: () => gatedSqlite<any>(new Sqlite(':memory:')) },
  { name: 'postgres', open: () => ({ sql: new PostgresSql(pool), db: postgresKysely<any>(pool) }) },
];

beforeAll(async () => {
  await admin.query(`CREATE DATABASE ${database}`);
  pool = postgresPool(`${SERVER}/${database}`);
});
afterAll(async () => {
  await pool.end();
  await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  await admin.end();
});

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.each(engines)('statements on $name', ({ name, open }) => {
  let sql: Sql;
  let db: Kysely<any>;
  const table = `t_${name}`;
  beforeAll(async () => {
    ({ sql, db } = open());
    await sql.run(`CREATE TABLE ${table} (id bigint PRIMARY KEY, name text NOT NULL UNIQUE, n bigint)`);
  });

  it('runs, counts what changed and reads rows, with ? placeholders (not inside quotes)', async () => {
    expect(sql.engine).toBe(name);
    expect(await sql.run(`INSERT INTO ${table} (id, name, n) VALUES (?, ?, ?), (?, ?, ?)`, [1, 'a?', 2 ** 40, 2, 'b', null])).toBe(2);
    expect(await sql.first(`SELECT id, name, n FROM ${table} WHERE name = 'a?' AND id = ?`, [1])).toEqual({ id: 1, name: 'a?', n: 2 ** 40 });
    expect(await sql.all(`SELECT name FROM ${table} ORDER BY id`)).toEqual([{ name: 'a?' }, { name: 'b' }]);
    expect(await sql.first(`SELECT name FROM ${table} WHERE id = ?`, [99])).toBeUndefined();
    expect(await sql.run(`UPDATE ${table} SET n = ? WHERE id > ?`, [7, 0])).toBe(2);
    await expect(sql.run(`INSERT INTO ${table} (id, name) VALUES (?, ?)`, [3, 'b'])).rejects.toThrow(/unique/i);
  });

  it('commits a transaction whole, rolls one back whole when its work fails, and nests one in another', async () => {
    await sql.transaction(async (tx) => {
      await tx.run(`INSERT INTO ${table} (id, name) VALUES (?, ?)`, [10, 'ten']);
      await tx.transaction(async (inner) => inner.run(`INSERT INTO ${table} (id, name) VALUES (?, ?)`, [11, 'eleven']));
    });
    await expect(
      sql.transaction(async (tx) => {
        await tx.run(`INSERT INTO ${table} (id, name) VALUES (?, ?)`, [12, 'twelve']);
        await tx.run(`INSERT INTO ${table} (id, name) VALUES (?, ?)`, [13, 'ten']);
      }),
    ).rejects.toThrow(/unique/i);
    expect(await sql.all(`SELECT id FROM ${table} WHERE id >= 10 ORDER BY id`)).toEqual([{ id: 10 }, { id: 11 }]);
  });

  it("keeps another request's statements and queries out of an open transaction: they are not rolled back with it", async () => {
    let inside = false;
    const failing = sql.transaction(async (tx) => {
      inside = true;
      await tx.run(`INSERT INTO ${table} (id, name) VALUES (?, ?)`, [20, 'rolled back']);
      await pause(50);
      throw new Error('the work failed');
    });
    await pause(10);
    expect(inside).toBe(true);
    // Both issued while the transaction is open and waiting.
    const outside = sql.run(`INSERT INTO ${table} (id, name) VALUES (?, ?)`, [21, 'kept']);
    const viaKysely = db.insertInto(table).values({ id: 22, name: 'kept too' }).execute();
    await expect(failing).rejects.toThrow('the work failed');
    await Promise.all([outside, viaKysely]);
    expect(await sql.all(`SELECT id FROM ${table} WHERE id >= 20 ORDER BY id`)).toEqual([{ id: 21 }, { id: 22 }]);
    expect((await raw<{ n: number }>`SELECT count(*) AS n FROM ${raw.table(table)}`.execute(db)).rows[0]?.n).toBe(6);
  });
});

describe('placeholders for PostgreSQL', () => {
  it('numbers the ones outside string literals and quoted identifiers', () => {
    expect(numberedPlaceholders(`SELECT "a?" FROM t WHERE b = ? AND c = '?' AND d IN (?, ?)`)).toBe(`SELECT "a?" FROM t WHERE b = $1 AND c = '?' AND d IN ($2, $3)`);
  });
});
