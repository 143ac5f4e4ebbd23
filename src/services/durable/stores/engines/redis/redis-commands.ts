/**
 * Which Redis commands a `redis` store answers, and which of them write. A store answers the
 * data commands below (strings, hashes, lists, sets, sorted sets, streams, key management and
 * PING) plus the names in its `config.allow_commands`. Everything else is refused by name
 * before it reaches the server; commands that block or change the state of the one connection
 * the store shares between all its callers can never be allowed.
 */

const STRINGS = {
  read: 'GET GETRANGE MGET STRLEN SUBSTR LCS GETBIT BITCOUNT BITPOS BITFIELD_RO',
  write:
    'APPEND DECR DECRBY GETDEL GETEX GETSET INCR INCRBY INCRBYFLOAT MSET MSETNX PSETEX SET SETEX SETNX SETRANGE SETBIT BITOP BITFIELD',
};
const HASHES = {
  read: 'HEXISTS HGET HGETALL HKEYS HLEN HMGET HRANDFIELD HSCAN HSTRLEN HVALS',
  write: 'HDEL HINCRBY HINCRBYFLOAT HMSET HSET HSETNX',
};
const LISTS = {
  read: 'LINDEX LLEN LPOS LRANGE',
  write: 'LINSERT LMOVE LMPOP LPOP LPUSH LPUSHX LREM LSET LTRIM RPOP RPOPLPUSH RPUSH RPUSHX',
};
const SETS = {
  read: 'SCARD SDIFF SINTER SINTERCARD SISMEMBER SMEMBERS SMISMEMBER SRANDMEMBER SSCAN SUNION',
  write: 'SADD SDIFFSTORE SINTERSTORE SMOVE SPOP SREM SUNIONSTORE',
};
const SORTED_SETS = {
  read:
    'ZCARD ZCOUNT ZDIFF ZINTER ZINTERCARD ZLEXCOUNT ZMSCORE ZRANDMEMBER ZRANGE ZRANGEBYLEX ZRANGEBYSCORE ZRANK ' +
    'ZREVRANGE ZREVRANGEBYLEX ZREVRANGEBYSCORE ZREVRANK ZSCAN ZSCORE ZUNION',
  write:
    'ZADD ZDIFFSTORE ZINCRBY ZINTERSTORE ZMPOP ZPOPMAX ZPOPMIN ZRANGESTORE ZREM ZREMRANGEBYLEX ZREMRANGEBYRANK ' +
    'ZREMRANGEBYSCORE ZUNIONSTORE',
};
/** XREAD and XREADGROUP are refused with a BLOCK argument (see `refusal`). */
const STREAMS = {
  read: 'XINFO XLEN XPENDING XRANGE XREAD XREVRANGE',
  write: 'XACK XADD XAUTOCLAIM XCLAIM XDEL XGROUP XREADGROUP XTRIM',
};
const KEYS = {
  read: 'EXISTS TTL PTTL TYPE SCAN PING',
  write: 'DEL EXPIRE PEXPIRE RENAME UNLINK',
};

const words = (text: string) => text.split(' ');
const GROUPS = [STRINGS, HASHES, LISTS, SETS, SORTED_SETS, STREAMS, KEYS];

/** The commands every redis store answers. */
export const DATA_COMMANDS: ReadonlySet<string> = new Set(GROUPS.flatMap((group) => [...words(group.read), ...words(group.write)]));

/** The data commands that only read; any other command counts as a write. */
const READ_COMMANDS: ReadonlySet<string> = new Set(GROUPS.flatMap((group) => words(group.read)));

/**
 * Commands that block the shared connection or change its state (database, subscriptions,
 * authentication, transactions): `config.allow_commands` cannot add them.
 */
export const NEVER_ALLOWED: ReadonlySet<string> = new Set(
  words(
    'SELECT SWAPDB MONITOR SUBSCRIBE PSUBSCRIBE SSUBSCRIBE UNSUBSCRIBE PUNSUBSCRIBE SUNSUBSCRIBE AUTH HELLO QUIT RESET ' +
      'CLIENT MULTI EXEC DISCARD WATCH UNWATCH WAIT WAITAOF BLPOP BRPOP BRPOPLPUSH BLMOVE BLMPOP BZPOPMIN BZPOPMAX BZMPOP ' +
      'SHUTDOWN DEBUG REPLICAOF SLAVEOF SYNC PSYNC',
  ),
);

/** Server administration, refused unless `config.allow_commands` names it. */
const ADMIN = new Set(
  words(
    'CONFIG FLUSHALL FLUSHDB MODULE ACL MIGRATE SAVE BGSAVE BGREWRITEAOF SCRIPT FUNCTION ' +
      'EVAL EVALSHA EVAL_RO EVALSHA_RO FCALL FCALL_RO KEYS',
  ),
);

/** The upper-case command name of an argv, or undefined when the first element is not a name. */
export function commandName(command: unknown[]): string | undefined {
  const name = command[0];
  return typeof name === 'string' && /^[A-Za-z][A-Za-z0-9_|.-]{0,63}$/.test(name) ? name.toUpperCase() : undefined;
}

/** Whether a command changes data (for `config.read_only`); unknown names count as writes. */
export function commandWrites(command: unknown[]): boolean {
  const name = commandName(command);
  return name === undefined || !READ_COMMANDS.has(name);
}

/**
 * Why a store refuses this command (the message of a 400), or undefined when it answers it.
 * `allowed` are the store's `config.allow_commands`, upper case.
 */
export function refusal(command: unknown[], allowed: ReadonlySet<string>): string | undefined {
  const name = commandName(command);
  if (name === undefined) return 'command[0]: must be a redis command name';
  if (NEVER_ALLOWED.has(name)) {
    return `command: redis command '${name}' is not allowed (it blocks or changes the store's shared connection)`;
  }
  if ((name === 'XREAD' || name === 'XREADGROUP') && blocks(command)) {
    return `command: redis command '${name}' with BLOCK is not allowed (it blocks the store's shared connection)`;
  }
  if (DATA_COMMANDS.has(name) || allowed.has(name)) return undefined;
  if (ADMIN.has(name)) {
    return `command: redis command '${name}' is not allowed (server administration; config.allow_commands can allow it)`;
  }
  return `command: redis command '${name}' is not on the allow-list (config.allow_commands adds names)`;
}

/** Whether an XREAD / XREADGROUP has a BLOCK option (among the options before STREAMS, not a key named block). */
function blocks(command: unknown[]): boolean {
  const options = command.slice(1).map((arg) => (typeof arg === 'string' ? arg.toUpperCase() : ''));
  const streams = options.indexOf('STREAMS');
  return (streams === -1 ? options : options.slice(0, streams)).includes('BLOCK');
}
