# Runs one sqlite store request inside a sandbox, with the image's python3 and its standard
# library (sandboxd's sqlite engine sends this script as the first line of stdin to a
# `python3 -I -c` loader, see sqlite-sandbox.ts). Reads one JSON request from the rest of
# stdin, prints one JSON answer line on stdout: {"ok": true, "value": ...} or
# {"ok": false, "error": {"code", "message", "engine_code"?, "statement"?}}. The shapes and
# conversions are those of the host engine (docs/decisions.md, "sqlite stores"): integers beyond
# 2^53 as strings, BLOBs as base64, a column's type the storage class of its first value.
import base64
import json
import math
import sqlite3
import sys
import time
import urllib.parse

SAFE = 2**53 - 1
# The answer travels through the exec's 8 MiB output: leave room for the envelope.
MAX_RESULT_BYTES = 8 * 1024 * 1024 - 64 * 1024


class Refused(Exception):
    def __init__(self, code, message, statement=None):
        super().__init__(message)
        self.code = code
        self.statement = statement


def json_bytes(value):
    # As the answer spells it: json.dumps escapes quotes, control and non-ASCII characters.
    if isinstance(value, str):
        return len(json.dumps(value)) + 1
    if isinstance(value, bytes):
        return (len(value) + 2) // 3 * 4 + 3
    return 24


def cell(value, types, i):
    if value is None:
        return None
    if isinstance(value, bytes):
        types[i] = "blob"
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, int):
        if types[i] == "null":
            types[i] = "integer"
        return value if -SAFE <= value <= SAFE else str(value)
    if isinstance(value, float):
        if types[i] == "null":
            types[i] = "real"
        return value if math.isfinite(value) else None
    if types[i] == "null":
        types[i] = "text"
    return value


def read_rows(cursor, max_rows):
    columns = [d[0] for d in cursor.description]
    types = ["null"] * len(columns)
    rows, size, truncated = [], 0, False
    while True:
        batch = cursor.fetchmany(256)
        if not batch:
            break
        for raw in batch:
            size += 2 + sum(json_bytes(v) for v in raw)
            if len(rows) == max_rows or size > MAX_RESULT_BYTES:
                truncated = True
                break
            rows.append([cell(v, types, i) for i, v in enumerate(raw)])
        if truncated:
            break
    return {"columns": columns, "column_types": types, "rows": rows, "truncated": truncated}


def params_of(params):
    return params if isinstance(params, dict) else tuple(params)


def run(cursor, sql, params, field, params_field):
    try:
        cursor.execute(sql, params_of(params))
    except sqlite3.ProgrammingError as err:
        text = str(err)
        if "one statement at a time" in text:
            raise Refused("BAD_REQUEST", field + ": holds more than one statement; send one per sql (execute takes several as statements[])")
        raise Refused("BAD_REQUEST", params_field + ": " + text)


def connect(request, read_only):
    path = request["path"]
    if read_only:
        conn = sqlite3.connect("file:" + urllib.parse.quote(path) + "?mode=ro", uri=True, isolation_level=None, timeout=5)
        conn.execute("PRAGMA query_only = 1")
    else:
        conn = sqlite3.connect(path, isolation_level=None, timeout=5)
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        conn.execute("PRAGMA max_page_count = %d" % max(1, request["max_bytes"] // page_size))
    conn.execute("PRAGMA foreign_keys = ON")
    conn.text_factory = lambda raw: raw.decode("utf-8", "replace")
    deadline = time.monotonic() + request["timeout_ms"] / 1000
    conn.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, 10000)
    return conn


def query(request):
    conn = connect(request, True)
    cursor = conn.cursor()
    try:
        run(cursor, request["sql"], request["params"], "sql", "params")
    except sqlite3.Error as err:
        # sqlite_errorname came with python 3.11; older ones only have the message.
        if getattr(err, "sqlite_errorname", "").startswith("SQLITE_READONLY") or "readonly database" in str(err):
            raise Refused("READ_ONLY", "query: statement writes")
        raise
    if cursor.description is None:
        return {"columns": [], "column_types": [], "rows": [], "truncated": False}
    return read_rows(cursor, request["max_rows"])


def statement_result(conn, statement, index, batch, max_rows):
    field, params_field = ("statements[%d].sql" % index, "statements[%d].params" % index) if batch else ("sql", "params")
    before = conn.total_changes
    cursor = conn.cursor()
    try:
        run(cursor, statement["sql"], statement["params"], field, params_field)
        result = read_rows(cursor, max_rows) if cursor.description is not None else None
        cursor.close()
    except Refused as err:
        err.statement = index if batch else None
        raise
    changes, rowid = conn.execute("SELECT changes(), last_insert_rowid()").fetchone()
    affected = 0 if conn.total_changes == before else changes
    answer = {
        "rows_affected": affected,
        "last_insert_id": (rowid if -SAFE <= rowid <= SAFE else str(rowid)) if statement["inserts"] and affected > 0 else None,
    }
    if result is not None:
        answer["result"] = result
    return answer


def execute(request):
    conn = connect(request, False)
    statements = request["statements"]
    batch = len(statements) > 1
    transaction = batch and request["transaction"]
    results = []
    if transaction:
        conn.execute("BEGIN IMMEDIATE")
    try:
        for index, statement in enumerate(statements):
            try:
                results.append(statement_result(conn, statement, index, batch, request["max_rows"]))
            except sqlite3.Error as err:
                err.statement = index if batch else None
                raise
        if transaction:
            conn.execute("COMMIT")
    finally:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
    return results


def prepare(request):
    # Creates the file when it is missing and proves it is a database.
    connect(request, False).execute("PRAGMA schema_version").fetchone()
    return None


def answer(request):
    try:
        value = {"query": query, "execute": execute, "open": prepare}[request["op"]](request)
        return {"ok": True, "value": value}
    except Refused as err:
        error = {"code": err.code, "message": str(err)}
        if err.statement is not None and err.code != "READ_ONLY":
            error["statement"] = err.statement
        return {"ok": False, "error": error}
    except sqlite3.Error as err:
        statement = getattr(err, "statement", None)
        prefix = "" if statement is None else "statements[%d]: " % statement
        name = getattr(err, "sqlite_errorname", None) or "SQLITE_ERROR"
        if str(err) == "interrupted":
            error = {"code": "TIMEOUT", "message": "the statement did not finish within %d ms and was stopped" % request["timeout_ms"]}
        elif name == "SQLITE_FULL":
            error = {"code": "PAYLOAD_TOO_LARGE", "message": prefix + str(err), "engine_code": name}
        else:
            error = {"code": "SQL_ERROR", "message": prefix + str(err), "engine_code": name}
        if statement is not None:
            error["statement"] = statement
        return {"ok": False, "error": error}


sys.stdout.write(json.dumps(answer(json.loads(sys.stdin.read())), separators=(",", ":")) + "\n")
