#!/usr/bin/env bash
# The database servers that the store tests connect to (README, "Stores"): PostgreSQL on
# 127.0.0.1:5432 (trust), MariaDB on 127.0.0.1:3306 (root, no password) and Redis on
# 127.0.0.1:6379. Each one that does not answer is started with the command the machine's
# description gives; one that still does not answer fails the run (the tests never skip it).
# Beside them, a second PostgreSQL cluster `auth` on 127.0.0.1:5433 that wants a password
# (scram-sha-256), with the superuser sandboxd_admin / sandboxd-admin (PG_AUTH_* below), so
# that the tests of right and wrong passwords talk to a server that checks them. It is made
# with Debian's pg_createcluster when missing and started when down (idempotent).
set -euo pipefail

say() { printf 'databases: %s\n' "$*"; }

PG_AUTH_CLUSTER=auth
PG_AUTH_PORT=5433
PG_AUTH_USER=sandboxd_admin
PG_AUTH_PASSWORD=sandboxd-admin

answers() {
  case "$1" in
    postgres) pg_isready -q -h 127.0.0.1 -p 5432 ;;
    postgres-auth)
      PGPASSWORD="$PG_AUTH_PASSWORD" psql -h 127.0.0.1 -p "$PG_AUTH_PORT" -U "$PG_AUTH_USER" -d postgres -Atqc 'SELECT 1' >/dev/null 2>&1 ;;
    mariadb) mariadb-admin -uroot -h127.0.0.1 -P3306 --connect-timeout=2 ping >/dev/null 2>&1 ;;
    redis) [ "$(redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null)" = PONG ] ;;
  esac
}

start() {
  case "$1" in
    postgres) pg_ctlcluster --skip-systemctl-redirect "$(pg_version)" main start ;;
    postgres-auth) start_auth_cluster ;;
    mariadb) start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd ;;
    redis)
      mkdir -p /var/lib/redis /var/log/redis
      redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
        --dir /var/lib/redis --logfile /var/log/redis/ci.log
      ;;
  esac
}

pg_version() { ls /etc/postgresql | sort -V | tail -n 1; }

# The password cluster: made once (host connections by scram-sha-256 only, local ones by peer),
# started when down, its admin role (re)made with the known password.
start_auth_cluster() {
  local version
  version="$(pg_version)"
  if [ ! -d "/etc/postgresql/$version/$PG_AUTH_CLUSTER" ]; then
    pg_createcluster "$version" "$PG_AUTH_CLUSTER" -p "$PG_AUTH_PORT" -- \
      --auth-host=scram-sha-256 --auth-local=peer >/dev/null
  fi
  pg_ctlcluster --skip-systemctl-redirect "$version" "$PG_AUTH_CLUSTER" start 2>/dev/null \
    || pg_ctlcluster --skip-systemctl-redirect "$version" "$PG_AUTH_CLUSTER" status >/dev/null
  for _ in $(seq 1 60); do pg_isready -q -h 127.0.0.1 -p "$PG_AUTH_PORT" && break; sleep 0.5; done
  runuser -u postgres -- psql -p "$PG_AUTH_PORT" -d postgres -v ON_ERROR_STOP=1 -qc "
    DO \$\$ BEGIN
      IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '$PG_AUTH_USER') THEN
        CREATE ROLE $PG_AUTH_USER LOGIN SUPERUSER;
      END IF;
    END \$\$;
    ALTER ROLE $PG_AUTH_USER PASSWORD '$PG_AUTH_PASSWORD';" >/dev/null
}

for server in postgres postgres-auth mariadb redis; do
  if answers "$server"; then continue; fi
  say "starting $server"
  start "$server" || true
  for _ in $(seq 1 60); do answers "$server" && break; sleep 0.5; done
  answers "$server" || { say "$server does not answer on 127.0.0.1 after starting it; the store tests need it" >&2; exit 1; }
done
say "PostgreSQL (5432 trust, $PG_AUTH_PORT password), MariaDB and Redis answer on 127.0.0.1"
