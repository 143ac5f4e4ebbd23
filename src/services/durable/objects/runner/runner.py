# sandboxd's durable-object runner for python, run inside the object's sandbox as its user.
# It reads one JSON request per line on stdin and answers each with one line on stdout:
#   <nonce> {"ok":true,"result":...,"writes":{"put":{...},"delete":[...],"delete_all":false},"alarm":...}
#   <nonce> {"ok":false,"kind":"threw"|"method_not_found","error":{"name","message","stack"},"methods":[...]}
# As a persistent worker it serves call after call; given one request and then the end of its
# input, it serves that one and exits. Whatever a method prints goes to stderr, never stdout.
# Storage is a snapshot the host sends with each call; writes are buffered and returned, and
# the host commits them (or nothing) in one transaction.
import asyncio
import copy
import datetime
import importlib.util
import inspect
import json
import os
import sys
import traceback

# The answers go to a copy of the real stdout; fd 1 becomes stderr, so that print() and any
# child process a method starts cannot corrupt them.
_answers = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
os.dup2(2, 1)
sys.stdout = sys.stderr

MAX_KEY_BYTES = 2048
_modules = {}


def _load(path):
    module = _modules.get(path)
    if module is None:
        spec = importlib.util.spec_from_file_location("sandboxd_object_" + str(len(_modules)), path)
        module = importlib.util.module_from_spec(spec)
        class_dir = os.path.dirname(os.path.dirname(path))
        if class_dir not in sys.path:
            sys.path.insert(0, class_dir)
        spec.loader.exec_module(module)
        _modules[path] = module
    return module


def _methods_of(module):
    return sorted(
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and inspect.isfunction(value) and value.__module__ == module.__name__
    )


def _check_key(key):
    if not isinstance(key, str):
        raise TypeError("storage keys must be strings")
    if len(key.encode("utf-8")) > MAX_KEY_BYTES:
        raise ValueError("storage key longer than %d bytes" % MAX_KEY_BYTES)


def _json_copy(value, what):
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError) as err:
        raise TypeError("%s must be a JSON value: %s" % (what, err))


class Storage:
    """ctx.storage over the snapshot; records the writes a commit applies."""

    def __init__(self, initial):
        self._data = dict(initial or {})
        self._puts = {}
        self._deletes = set()
        self._delete_all = False

    def get(self, key, default=None):
        if isinstance(key, list):
            return {k: copy.deepcopy(self._data[k]) for k in key if k in self._data}
        _check_key(key)
        return copy.deepcopy(self._data[key]) if key in self._data else default

    def put(self, key, value=None):
        if isinstance(key, dict):
            for k, v in key.items():
                self._put(k, v)
        else:
            self._put(key, value)

    def _put(self, key, value):
        _check_key(key)
        value = _json_copy(value, "the value of %r" % key)
        self._data[key] = value
        self._puts[key] = value
        self._deletes.discard(key)

    def delete(self, key):
        if isinstance(key, list):
            return sum(1 for k in key if self._remove(k))
        return self._remove(key)

    def _remove(self, key):
        _check_key(key)
        had = key in self._data
        self._data.pop(key, None)
        self._puts.pop(key, None)
        self._deletes.add(key)
        return had

    def list(self, prefix=None, start=None, end=None, reverse=False, limit=None):
        keys = sorted(self._data)
        if prefix is not None:
            keys = [k for k in keys if k.startswith(prefix)]
        if start is not None:
            keys = [k for k in keys if k >= start]
        if end is not None:
            keys = [k for k in keys if k < end]
        if reverse:
            keys.reverse()
        if limit is not None:
            keys = keys[:limit]
        return {k: copy.deepcopy(self._data[k]) for k in keys}

    def delete_all(self):
        self._data.clear()
        self._puts.clear()
        self._deletes.clear()
        self._delete_all = True

    deleteAll = delete_all

    def writes(self):
        return {"put": self._puts, "delete": sorted(self._deletes), "delete_all": self._delete_all}


class Context:
    def __init__(self, request):
        obj = request["object"]
        self.id = obj["id"]
        self.class_name = obj["class"]
        self.object_id = obj["object_id"]
        self.now = datetime.datetime.fromisoformat(request["now"].replace("Z", "+00:00"))
        self.storage = Storage(request.get("storage"))
        self._alarm = request.get("alarm")
        self._alarm_changed = False

    def set_alarm(self, when, method="alarm", args=None):
        if isinstance(when, datetime.datetime):
            at = when if when.tzinfo else when.replace(tzinfo=datetime.timezone.utc)
        elif isinstance(when, (int, float)):
            at = datetime.datetime.fromtimestamp(when / 1000, datetime.timezone.utc)
        elif isinstance(when, str):
            at = datetime.datetime.fromisoformat(when.replace("Z", "+00:00"))
        elif isinstance(when, dict) and "in_seconds" in when:
            at = self.now + datetime.timedelta(seconds=when["in_seconds"])
        else:
            raise TypeError("set_alarm takes a datetime, epoch milliseconds, an RFC 3339 string or {'in_seconds': n}")
        fire_at = at.astimezone(datetime.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        self._alarm = {"fire_at": fire_at, "method": method, "args": _json_copy(args if args is not None else {}, "alarm args")}
        self._alarm_changed = True

    def get_alarm(self):
        return copy.deepcopy(self._alarm)

    def delete_alarm(self):
        self._alarm = None
        self._alarm_changed = True

    setAlarm, getAlarm, deleteAlarm = set_alarm, get_alarm, delete_alarm

    def alarm_change(self):
        if not self._alarm_changed:
            return None, False
        if self._alarm is None:
            return None, True
        return {"at": self._alarm["fire_at"], "method": self._alarm["method"], "args": self._alarm["args"]}, True


def _failure(kind, err, **extra):
    return dict(
        ok=False,
        kind=kind,
        error={"name": type(err).__name__, "message": str(err), "stack": "".join(traceback.format_exception(err))},
        **extra,
    )


def _serve(request):
    module = _load(request["module"])
    methods = _methods_of(module)
    if request["method"] == "__describe":
        return {"ok": True, "result": methods, "writes": {"put": {}, "delete": [], "delete_all": False}}
    if request["method"] not in methods:
        return _failure("method_not_found", LookupError("no method " + request["method"]), methods=methods)
    ctx = Context(request)
    os.environ.update(SANDBOXD_OBJECT_ID=ctx.id, SANDBOXD_OBJECT_CLASS=ctx.class_name, SANDBOXD_CALL_ID=request.get("call_id") or "")
    result = getattr(module, request["method"])(request.get("args"), ctx)
    if inspect.isawaitable(result):
        result = asyncio.run(result)
    reply = {"ok": True, "result": _json_copy(result, "the result"), "writes": ctx.storage.writes()}
    alarm, changed = ctx.alarm_change()
    if changed:
        reply["alarm"] = alarm
    return reply


def _handle(line):
    try:
        request = json.loads(line)
    except ValueError:
        return
    try:
        reply = _serve(request)
    except BaseException as err:  # a method's SystemExit is a failure of the call, not of the worker
        reply = _failure("threw", err)
    try:
        text = json.dumps(reply)
    except (TypeError, ValueError) as err:
        text = json.dumps(_failure("threw", err))
    _answers.write("%s %s\n" % (request.get("nonce", ""), text))
    _answers.flush()


for _line in sys.stdin:
    _handle(_line)
