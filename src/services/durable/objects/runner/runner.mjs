// sandboxd's durable-object runner for node, run inside the object's sandbox as its user.
// It reads one JSON request per line on stdin and answers each with one line on stdout:
//   <nonce> {"ok":true,"result":...,"writes":{"put":{...},"delete":[...],"delete_all":false},"alarm":...}
//   <nonce> {"ok":false,"kind":"threw"|"method_not_found","error":{"name","message","stack"},"methods":[...]}
// As a persistent worker it serves call after call; given one request and then the end of its
// input, it serves that one and exits. Whatever a method prints goes to stderr, never stdout.
// Storage is a snapshot the host sends with each call; writes are buffered and returned, and
// the host commits them (or nothing) in one transaction.
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { format } from 'node:util';

const answer = process.stdout.write.bind(process.stdout);
const toStderr = (...args) => {
  process.stderr.write(format(...args) + '\n');
};
console.log = console.info = console.debug = console.warn = console.error = console.trace = toStderr;
process.stdout.write = (chunk, encoding, callback) => process.stderr.write(chunk, encoding, callback);

// A method's stray promise or timer must not take the worker (and the next calls) down.
process.on('unhandledRejection', (err) => toStderr('unhandled rejection:', err));
process.on('uncaughtException', (err) => toStderr('uncaught exception:', err));

const MAX_KEY_BYTES = 2048;
const modules = new Map();

async function load(path) {
  let module = modules.get(path);
  if (!module) {
    module = await import(pathToFileURL(path).href);
    modules.set(path, module);
  }
  return module;
}

/** The callable methods of a module: its exported functions, or its default class's methods. */
function methodsOf(module) {
  const names = new Set();
  const target = module.default;
  if (typeof target === 'function' && target.prototype) {
    for (let proto = target.prototype; proto && proto !== Object.prototype; proto = Object.getPrototypeOf(proto)) {
      for (const name of Object.getOwnPropertyNames(proto)) {
        if (name !== 'constructor' && typeof proto[name] === 'function') names.add(name);
      }
    }
  } else {
    for (const [name, value] of Object.entries(module)) if (name !== 'default' && typeof value === 'function') names.add(name);
  }
  return [...names].filter((name) => !name.startsWith('_')).sort();
}

function checkKey(key) {
  if (typeof key !== 'string') throw new TypeError('storage keys must be strings');
  if (Buffer.byteLength(key) > MAX_KEY_BYTES) throw new RangeError(`storage key longer than ${MAX_KEY_BYTES} bytes`);
}

/** A JSON copy of a value: what the host will store. */
function jsonCopy(value, what) {
  const text = JSON.stringify(value);
  if (text === undefined) throw new TypeError(`${what} must be a JSON value (got ${typeof value})`);
  return JSON.parse(text);
}

/** ctx.storage over the snapshot; records the writes a commit applies. */
function makeStorage(initial) {
  const data = new Map(Object.entries(initial ?? {}));
  const puts = new Map();
  const deletes = new Set();
  let deleteAll = false;
  const put = (key, value) => {
    checkKey(key);
    const copy = jsonCopy(value, `the value of '${key}'`);
    data.set(key, copy);
    puts.set(key, copy);
    deletes.delete(key);
  };
  const remove = (key) => {
    checkKey(key);
    const had = data.delete(key);
    puts.delete(key);
    deletes.add(key);
    return had;
  };
  const storage = {
    get(key, fallback) {
      if (Array.isArray(key)) {
        const found = {};
        for (const k of key) if (data.has(k)) found[k] = structuredClone(data.get(k));
        return found;
      }
      checkKey(key);
      return data.has(key) ? structuredClone(data.get(key)) : fallback;
    },
    put(key, value) {
      if (key !== null && typeof key === 'object' && !Array.isArray(key)) {
        for (const [k, v] of Object.entries(key)) put(k, v);
      } else put(key, value);
    },
    delete(key) {
      if (Array.isArray(key)) return key.filter(remove).length;
      return remove(key);
    },
    list({ prefix, start, end, reverse = false, limit } = {}) {
      let keys = [...data.keys()].sort();
      if (prefix !== undefined) keys = keys.filter((k) => k.startsWith(prefix));
      if (start !== undefined) keys = keys.filter((k) => k >= start);
      if (end !== undefined) keys = keys.filter((k) => k < end);
      if (reverse) keys.reverse();
      if (limit !== undefined) keys = keys.slice(0, limit);
      return Object.fromEntries(keys.map((k) => [k, structuredClone(data.get(k))]));
    },
    deleteAll() {
      data.clear();
      puts.clear();
      deletes.clear();
      deleteAll = true;
    },
  };
  // The handlers form works on a plain copy of the whole state and hands it back.
  Object.defineProperties(storage, {
    __snapshot: { value: () => structuredClone(Object.fromEntries(data)) },
    __replace: {
      value: (state) => {
        const next = jsonCopy(state ?? {}, 'state');
        for (const key of [...data.keys()]) if (!(key in next)) remove(key);
        for (const [key, value] of Object.entries(next)) {
          if (!data.has(key) || JSON.stringify(data.get(key)) !== JSON.stringify(value)) put(key, value);
        }
      },
    },
  });
  const writes = () => ({ put: Object.fromEntries(puts), delete: [...deletes], delete_all: deleteAll });
  return { storage, writes };
}

/** The alarm functions of ctx; `change()` is the new alarm, null (deleted) or undefined (untouched). */
function makeAlarm(current, now) {
  let alarm = current ?? null;
  let changed = false;
  return {
    setAlarm(when, method = 'alarm', args = {}) {
      let at;
      if (when instanceof Date) at = when;
      else if (typeof when === 'number') at = new Date(when);
      else if (typeof when === 'string') at = new Date(when);
      else if (when && typeof when === 'object' && typeof when.in_seconds === 'number') at = new Date(now.getTime() + when.in_seconds * 1000);
      if (!at || Number.isNaN(at.getTime())) throw new TypeError('setAlarm takes a Date, epoch milliseconds, an RFC 3339 string or {in_seconds}');
      alarm = { fire_at: at.toISOString(), method, args: jsonCopy(args, 'alarm args') };
      changed = true;
    },
    getAlarm: () => (alarm ? structuredClone(alarm) : null),
    deleteAlarm() {
      alarm = null;
      changed = true;
    },
    change: () => (changed ? (alarm && { at: alarm.fire_at, method: alarm.method, args: alarm.args }) : undefined),
  };
}

function failure(kind, err, extra = {}) {
  const error = err instanceof Error ? { name: err.name, message: err.message, stack: err.stack ?? '' } : { name: 'Error', message: String(err), stack: '' };
  return { ok: false, kind, error, ...extra };
}

async function serve(request) {
  const module = await load(request.module);
  const methods = methodsOf(module);
  if (request.method === '__describe') return { ok: true, result: methods, writes: { put: {}, delete: [], delete_all: false } };
  if (!methods.includes(request.method)) return failure('method_not_found', new Error(`no method ${request.method}`), { methods });
  const now = new Date(request.now);
  const { storage, writes } = makeStorage(request.storage);
  const alarm = makeAlarm(request.alarm, now);
  const ctx = {
    id: request.object.id,
    class_name: request.object.class,
    object_id: request.object.object_id,
    now,
    storage,
    setAlarm: alarm.setAlarm,
    getAlarm: alarm.getAlarm,
    deleteAlarm: alarm.deleteAlarm,
  };
  Object.assign(process.env, { SANDBOXD_OBJECT_ID: ctx.id, SANDBOXD_OBJECT_CLASS: ctx.class_name, SANDBOXD_CALL_ID: request.call_id ?? '' });
  const target = typeof module.default === 'function' && module.default.prototype ? new module.default(ctx) : module;
  const result = await target[request.method](request.args, ctx);
  return { ok: true, result: result === undefined ? null : jsonCopy(result, 'the result'), writes: writes(), alarm: alarm.change() };
}

async function handle(line) {
  let request;
  try {
    request = JSON.parse(line);
  } catch {
    return; // not a request: nothing to answer
  }
  let reply;
  try {
    reply = await serve(request);
  } catch (err) {
    reply = failure('threw', err);
  }
  let text;
  try {
    text = JSON.stringify(reply);
  } catch (err) {
    text = JSON.stringify(failure('threw', err));
  }
  answer(`${request.nonce} ${text}\n`);
}

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity, terminal: false });
let queue = Promise.resolve();
lines.on('line', (line) => {
  queue = queue.then(() => handle(line));
});
lines.on('close', () => {
  queue.then(() => process.exit(0));
});
