import { describe, expect, it } from 'vitest';
import { checkHostStatement, statementShape } from '../../../../../../../src/services/durable/stores/engines/sqlite/sql-guard.js';

const refusal = (sql: string): string => {
  try {
    statementShape(sql, 'sql');
    checkHostStatement(sql, 'sql');
  } catch (err) {
    expect((err as { code: string }).code).toBe('BAD_REQUEST');
    return (err as Error).message;
  }
  return 'allowed';
};

describe('sql guard: what reaches host files is refused', () => {
  it.each([
    "ATTACH 'other.db' AS o",
    "attach database '/var/lib/sandboxd/sandboxd.db' as s",
    "  \n\tAtTaCh 'x' AS y",
    "/* a comment */ ATTACH 'x' AS y",
    "-- a line comment\nATTACH 'x' AS y",
    "/* nested /* */ ATTACH 'x' AS y",
    "EXPLAIN ATTACH 'x' AS y",
    "explain query plan attach 'x' as y",
    "EXPLAIN/**/QUERY/**/PLAN/**/ATTACH'x'AS y",
    "((ATTACH 'x' AS y))",
    "WITH a AS (SELECT 1) ATTACH 'x' AS y",
    "WITH RECURSIVE a(n) AS (SELECT 1), b AS MATERIALIZED (SELECT 2) ATTACH 'x' AS y",
    "SELECT 1; ATTACH 'x' AS y",
    "SELECT ';'; -- ;\n ATTACH 'x' AS y",
    "WITH x AS (SELECT 1), ATTACH 'x' AS y",
    'SELECT attach FROM t',
  ])('ATTACH: %s', (sql) => {
    expect(refusal(sql)).toMatch(/^sql: ATTACH is not allowed/);
  });

  it.each(['DETACH o', 'detach database o', '/**/ EXPLAIN DETACH o', 'SELECT 1;DETACH o'])('DETACH: %s', (sql) => {
    expect(refusal(sql)).toMatch(/^sql: DETACH is not allowed/);
  });

  it.each([
    "VACUUM INTO '/tmp/copy.db'",
    "vacuum main into '/tmp/copy.db'",
    "/* x */ VaCuUm\n--\nINTO '/tmp/copy.db'",
    "EXPLAIN VACUUM INTO '/tmp/copy.db'",
    "VACUUM \"main\" INTO 'x'",
    "SELECT 1; VACUUM INTO 'x'",
  ])('VACUUM INTO: %s', (sql) => {
    expect(refusal(sql)).toMatch(/^sql: VACUUM INTO is not allowed/);
  });

  it.each([
    ['PRAGMA database_list', /PRAGMA database_list is not allowed/],
    ['pragma Main.Database_List', /PRAGMA database_list is not allowed/],
    ['PRAGMA "database_list"', /PRAGMA database_list is not allowed/],
    ['/**/PRAGMA writable_schema = 1', /PRAGMA writable_schema is not allowed/],
    ['PRAGMA temp_store_directory = \'/tmp\'', /PRAGMA temp_store_directory is not allowed/],
    ['EXPLAIN PRAGMA integrity_check', /PRAGMA integrity_check is not allowed/],
    ['PRAGMA', /PRAGMA \(none\) is not allowed/],
    ['PRAGMA journal_mode = DELETE', /PRAGMA journal_mode can be read, not set/],
    ['PRAGMA main.journal_mode=off', /PRAGMA journal_mode can be read, not set/],
    ['PRAGMA foreign_keys = OFF', /PRAGMA foreign_keys can be read, not set/],
    ['PRAGMA foreign_keys(0)', /PRAGMA foreign_keys can be read, not set/],
    ['SELECT 1; PRAGMA database_list', /PRAGMA database_list is not allowed/],
  ])('PRAGMA outside the allow-list: %s', (sql, message) => {
    expect(refusal(sql)).toMatch(message);
  });

  it.each([
    'SELECT * FROM pragma_database_list',
    'select * from PRAGMA_DATABASE_LIST',
    'SELECT * FROM "pragma_database_list"',
    'SELECT * FROM [pragma_database_list]',
    'SELECT * FROM `pragma_database_list`',
    "SELECT * FROM 'pragma_database_list'",
    'SELECT * FROM main.pragma_database_list',
    'SELECT * FROM main . "pragma_compile_options"',
    'SELECT name FROM pragma_function_list()',
    'WITH x AS (SELECT * FROM pragma_module_list) SELECT * FROM x',
  ])('pragma functions outside the allow-list: %s', (sql) => {
    expect(refusal(sql)).toMatch(/^sql: pragma_\w+ is not allowed on a host sqlite store/i);
  });

  it.each(['BEGIN', 'begin immediate', 'COMMIT', 'END TRANSACTION', 'ROLLBACK', 'SAVEPOINT a', 'RELEASE a', '/* x */ Begin', 'EXPLAIN BEGIN'])(
    'transaction control: %s',
    (sql) => {
      expect(refusal(sql)).toMatch(/^sql: (BEGIN|COMMIT|END|ROLLBACK|SAVEPOINT|RELEASE) is not allowed: the store opens and ends transactions itself/);
    },
  );

  it('refuses empty statements and NUL characters', () => {
    expect(refusal('')).toBe('sql: holds no statement');
    expect(refusal('  -- only a comment\n /* and another */ ;')).toBe('sql: holds no statement');
    expect(refusal('SELECT 1\0; ATTACH')).toBe('sql: must not contain a NUL character');
  });
});

describe('sql guard: ordinary SQL passes', () => {
  it.each([
    'SELECT 1',
    "SELECT 'ATTACH x', \"attach\" FROM t",
    "SELECT * FROM t WHERE note = 'VACUUM INTO x'",
    'VACUUM',
    'VACUUM main',
    'CREATE TABLE attachments (id INTEGER, detach_at TEXT)',
    'SELECT "attach", [detach] FROM t',
    'INSERT INTO vacuum_log VALUES (1)',
    "INSERT INTO t (v) VALUES ('PRAGMA database_list')",
    'PRAGMA table_info(t)',
    'PRAGMA main.index_list("t")',
    'PRAGMA user_version',
    'PRAGMA user_version = 7',
    'PRAGMA journal_mode',
    'PRAGMA foreign_keys',
    'SELECT * FROM pragma_table_info(\'t\')',
    'SELECT * FROM main.pragma_index_list(?)',
    'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 5) SELECT x FROM c',
    'CREATE TRIGGER tr AFTER INSERT ON t BEGIN UPDATE t SET v = 1; END',
    'SELECT 1.5e3, .5, x\'00ff\', :a, @b, $c, ?1',
  ])('%s', (sql) => {
    expect(refusal(sql)).toBe('allowed');
  });

  it('names the field it was given and tells the verb', () => {
    expect(() => statementShape('BEGIN', 'statements[2].sql')).toThrow(/^statements\[2\]\.sql: BEGIN/);
    expect(statementShape('/* x */ WITH a AS (SELECT 1) INSERT INTO t SELECT * FROM a', 'sql').verb).toBe('INSERT');
    expect(statementShape('replace into t values (1)', 'sql').verb).toBe('REPLACE');
    expect(statementShape('PRAGMA journal_mode', 'sql').pragmaRead).toBe(true);
    expect(statementShape('PRAGMA user_version = 3', 'sql').pragmaRead).toBe(false);
  });
});
