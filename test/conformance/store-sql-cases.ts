import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { MAX_RESULT_BYTES, type StoreHandle, type StoreParams } from '../../src/services/durable/stores/store-engine.js';
import { refusal, uniqueName, type Skip, type SuiteContext } from './store-engine-conformance.js';

/**
 * How the suite's SQL is spelled on one engine. The cases use one table, made by `createTable`,
 * with an integer key the engine assigns, a unique `name` and a 64-bit integer `n`.
 */
export interface SqlDialect {
  /** The statement that makes the suite's table `name` (columns id, name, n). */
  createTable(name: string): string;
  /** The i-th placeholder (from 1): `?` or `$1`. */
  param(i: number): string;
  /** A FROM clause of n rows whose one column `x` counts from 1. */
  series(n: number): string;
  /** `text` repeated `times` times, as an expression. */
  repeat(text: string, times: number): string;
  /** The concatenation of two expressions. */
  concat(a: string, b: string): string;
  /** Bytes given in hex, as an expression of the engine's binary type. */
  bytes(hex: string): string;
  /** A SELECT that runs for far longer than any case waits, or why there is none. */
  endless: string | Skip;
  /** Whether `last_insert_id` is reported (sqlite, mysql) or always null (postgres). */
  lastInsertId: boolean;
  /** Whether named params (`:a`) are taken (sqlite only). */
  namedParams: boolean;
  /** A store that fills up: its config (a small max_bytes) and a statement that passes it; or why none does. */
  full: { config: Record<string, unknown>; table: string; fill: string } | Skip;
}

/** The query and execute cases, on the suite's shared store. */
export function sqlCases(context: SuiteContext, dialect: SqlDialect): void {
  const table = uniqueName('conf_items');
  const p = (i: number) => dialect.param(i);
  const query = (sql: string, params: StoreParams = [], maxRows = 1000, timeoutMs = 10_000, store: StoreHandle = context.store()) =>
    store.query!({ sql, params, maxRows, timeoutMs });
  const execute = (statements: { sql: string; params?: StoreParams }[], options: { transaction?: boolean; maxRows?: number; timeoutMs?: number } = {}) =>
    context.store().execute!({
      statements: statements.map((s) => ({ sql: s.sql, params: s.params ?? [] })),
      transaction: options.transaction ?? true,
      maxRows: options.maxRows ?? 1000,
      timeoutMs: options.timeoutMs ?? 10_000,
    });
  const count = async () => Number((await query(`SELECT count(*) FROM ${table}`)).rows[0]![0]);
  const insert = (name: string) => ({ sql: `INSERT INTO ${table} (name) VALUES (${p(1)})`, params: [name] });

  describe('sql: query and execute', () => {
    beforeAll(async () => {
      await execute([{ sql: dialect.createTable(table) }]);
    });
    beforeEach(async () => {
      await execute([{ sql: `DELETE FROM ${table}` }]);
    });

    it('binds params as values: quotes stay data, null stays null, an object goes as JSON text', async () => {
      const text = `it's "quoted"; DROP TABLE ${table}; --`;
      const result = await query(`SELECT ${p(1)} AS a, ${p(2)} AS b, ${p(3)} AS c`, [text, null, { a: [1, 'x'] }]);
      expect(result.columns).toEqual(['a', 'b', 'c']);
      expect(result.column_types).toHaveLength(3);
      for (const type of result.column_types) expect(typeof type).toBe('string');
      expect(result.rows).toEqual([[text, null, '{"a":[1,"x"]}']]);
      expect(result.truncated).toBe(false);
      expect(await count()).toBe(0);
    });

    it('refuses every write through query READ_ONLY, leaving the data as it was', async () => {
      await execute([insert('kept')]);
      for (const sql of [
        `INSERT INTO ${table} (name) VALUES ('sneaky')`,
        `UPDATE ${table} SET n = 1`,
        `DELETE FROM ${table}`,
        `CREATE TABLE ${table}_sneaky (a INTEGER)`,
        `DROP TABLE ${table}`,
      ]) {
        const err = await refusal(query(sql));
        expect(err.code, sql).toBe('READ_ONLY');
        expect(err.message, sql).toMatch(/^query: /);
      }
      expect((await query(`SELECT name, n FROM ${table}`)).rows).toEqual([['kept', null]]);
      expect((await failure(`SELECT * FROM ${table}_sneaky`)).code).toBe('SQL_ERROR');
    });

    it('refuses a stacked second statement in query and execute; none of it runs', async () => {
      await execute([insert('kept')]);
      for (const run of [() => query(`SELECT 1; DELETE FROM ${table}`), () => execute([{ sql: `SELECT 1; DELETE FROM ${table}` }])]) {
        const err = await refusal(run());
        expect(['BAD_REQUEST', 'SQL_ERROR']).toContain(err.code);
      }
      expect(await count()).toBe(1);
    });

    it('stops at max_rows and says so; a result that fits is not truncated', async () => {
      const some = await query(`SELECT x ${dialect.series(10)} ORDER BY x`, [], 3);
      expect(some.rows.map((row) => Number(row[0]))).toEqual([1, 2, 3]);
      expect(some.truncated).toBe(true);
      const all = await query(`SELECT x ${dialect.series(10)} ORDER BY x`, [], 10);
      expect(all.rows).toHaveLength(10);
      expect(all.truncated).toBe(false);
    });

    it('stops reading near the response cap, whatever characters the rows hold', async () => {
      // About 3 KiB of JSON per row (escapes and multi-byte characters count), 60 MiB in all.
      const wide = dialect.repeat('ü"\u0001x', 300);
      const result = await query(`SELECT x, ${wide} AS v ${dialect.series(20_000)}`, [], 100_000, 60_000);
      expect(result.truncated).toBe(true);
      expect(result.rows.length).toBeGreaterThan(100);
      expect(result.rows[0]![1]).toBe('ü"\u0001x'.repeat(300));
      expect(Buffer.byteLength(JSON.stringify(result.rows))).toBeLessThanOrEqual(MAX_RESULT_BYTES);
    });

    it('keeps integers beyond 2^53 exact, as strings', async () => {
      await execute([{ sql: `INSERT INTO ${table} (name, n) VALUES (${p(1)}, ${p(2)})`, params: ['big', '9007199254740993'] }]);
      const result = await query(`SELECT n FROM ${table} WHERE name = ${p(1)}`, ['big']);
      expect(result.rows).toEqual([['9007199254740993']]);
    });

    it('returns bytes as base64', async () => {
      const result = await query(`SELECT ${dialect.bytes('00ff10')} AS b`);
      expect(result.rows).toEqual([['AP8Q']]);
    });

    it(dialect.namedParams ? 'binds named params' : 'refuses named params with BAD_REQUEST naming params', async () => {
      if (dialect.namedParams) {
        expect((await query('SELECT :a AS a', { a: 'named' })).rows).toEqual([['named']]);
        return;
      }
      const err = await refusal(query('SELECT 1', { a: 1 }));
      expect(err.code).toBe('BAD_REQUEST');
      expect(err.message).toMatch(/^params: /);
    });

    it("reports an engine error as SQL_ERROR with the engine's code", async () => {
      const err = await refusal(query(`SELECT nope FROM ${table}`));
      expect(err.code).toBe('SQL_ERROR');
      expect(err.message).toMatch(/nope/);
      expect(err.details?.engine_code).toBeDefined();
      expect(err.details?.engine_code).not.toBeNull();
    });

    it('reports rows_affected and last_insert_id per statement', async () => {
      const [inserted] = await execute([insert('a')]);
      const id = (await query(`SELECT id FROM ${table} WHERE name = 'a'`)).rows[0]![0];
      expect(inserted).toEqual({ rows_affected: 1, last_insert_id: dialect.lastInsertId ? Number(id) : null });
      await execute([insert('b')]);
      const [updated] = await execute([{ sql: `UPDATE ${table} SET n = 7` }]);
      expect(updated).toEqual({ rows_affected: 2, last_insert_id: null });
    });

    it('counts every row a RETURNING statement changed while returning max_rows of them', async () => {
      const [result] = await execute([{ sql: `INSERT INTO ${table} (name) SELECT ${dialect.concat("'r'", 'x')} ${dialect.series(5)} RETURNING name` }], { maxRows: 2 });
      expect(result!.rows_affected).toBe(5);
      expect(result!.result).toMatchObject({ columns: ['name'], rows: [['r1'], ['r2']], truncated: true });
      expect(await count()).toBe(5);
    });

    it('runs a batch in one transaction: a failing statement undoes the others and is named', async () => {
      const err = await refusal(execute([insert('twice'), insert('twice')]));
      expect(err.code).toBe('SQL_ERROR');
      expect(err.details).toMatchObject({ statement: 1 });
      expect(err.message).not.toMatch(/^statements\[0\]/);
      expect(await count()).toBe(0);
    });

    it('runs each statement alone when transaction is false, keeping those before a failure', async () => {
      const err = await refusal(execute([insert('alone'), insert('alone')], { transaction: false }));
      expect(err.details).toMatchObject({ statement: 1 });
      expect(await count()).toBe(1);
    });

    it('serves calls at once', async () => {
      const results = await Promise.all(Array.from({ length: 12 }, (_, i) => query(`SELECT ${p(1)} AS v`, [String(i)])));
      expect(results.map((result) => result.rows[0]![0])).toEqual(Array.from({ length: 12 }, (_, i) => String(i)));
    });

    const endless = dialect.endless;
    if (typeof endless === 'string') {
      it('answers TIMEOUT at timeout_ms, in query and execute, commits nothing, and serves again', async () => {
        for (const run of [
          () => query(endless, [], 1, 700),
          () => execute([insert('late'), { sql: endless }], { timeoutMs: 700 }),
        ]) {
          const started = Date.now();
          const err = await refusal(run());
          const elapsed = Date.now() - started;
          expect(err.code).toBe('TIMEOUT');
          expect(elapsed).toBeGreaterThanOrEqual(650);
          expect(elapsed).toBeLessThan(700 + 4000);
        }
        expect(await count()).toBe(0);
        expect((await query('SELECT 1')).rows.map((row) => Number(row[0]))).toEqual([1]);
      });
    } else {
      it.skip(`answers TIMEOUT at timeout_ms: ${endless.skip}`, () => undefined);
    }

    const full = dialect.full;
    if ('fill' in full) {
      it('answers a full store PAYLOAD_TOO_LARGE naming config.max_bytes and keeps what it holds', async () => {
        const { handle } = await context.newStore(full.config);
        const run = (sql: string) => handle.execute!({ statements: [{ sql, params: [] }], transaction: true, maxRows: 10, timeoutMs: 10_000 });
        await run(dialect.createTable(full.table));
        await run(`INSERT INTO ${full.table} (name) VALUES ('kept')`);
        const err = await refusal(run(full.fill));
        expect(err.code).toBe('PAYLOAD_TOO_LARGE');
        expect(err.message).toContain('config.max_bytes');
        expect((await query(`SELECT name FROM ${full.table}`, [], 10, 10_000, handle)).rows).toEqual([['kept']]);
      });
    } else {
      it.skip(`answers a full store PAYLOAD_TOO_LARGE: ${full.skip}`, () => undefined);
    }
  });

  /** The error of a query that is expected to fail. */
  async function failure(sql: string) {
    return refusal(query(sql));
  }
}
