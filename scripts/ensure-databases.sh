#!/usr/bin/env bash
# The database servers that the store tests connect to (README, "Stores"): PostgreSQL on
# 127.0.0.1:5432 (trust), MariaDB on 127.0.0.1:3306 (root, no password) and Redis on
# 127.0.0.1:6379. Each one that does not answer is started with the command the machine's
# description gives; one that still does not answer fails the run (the tests never skip it).
set -euo pipefail

say() { printf 'databases: %s\n' "$*"; }

answers() {
  case "$1" in
    postgres) pg_isready -q -h 127.0.0.1 -p 5432 ;;
    mariadb) mariadb-admin -uroot -h127.0.0.1 -P3306 --connect-timeout=2 ping >/dev/null 2>&1 ;;
    redis) [ "$(redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null)" = PONG ] ;;
  esac
}

start() {
  case "$1" in
    postgres) pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -n 1)" main start ;;
    mariadb) start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd ;;
    redis)
      mkdir -p /var/lib/redis /var/log/redis
      redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
        --dir /var/lib/redis --logfile /var/log/redis/ci.log
      ;;
  esac
}

for server in postgres mariadb redis; do
  if answers "$server"; then continue; fi
  say "starting $server"
  start "$server" || true
  for _ in $(seq 1 60); do answers "$server" && break; sleep 0.5; done
  answers "$server" || { say "$server does not answer on 127.0.0.1 after starting it; the store tests need it" >&2; exit 1; }
done
say "PostgreSQL, MariaDB and Redis answer on 127.0.0.1"
