#!/usr/bin/env bash
# Make sure the real services the tests use are up: PostgreSQL, Redis, and Debian's nginx and Chromium.
# Installs them with apt-get when missing (needs root), starts them when stopped. Idempotent.
set -euo pipefail

need_root() {
  if [ "$(id -u)" != 0 ]; then
    echo "error: $1 is missing and installing it needs root; install it and re-run" >&2
    exit 1
  fi
}

apt_install() {
  need_root "$*"
  if [ -z "${APT_UPDATED:-}" ]; then apt-get update -qq; APT_UPDATED=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# --- PostgreSQL ---------------------------------------------------------------------------------
if ! command -v pg_ctlcluster >/dev/null 2>&1; then
  echo "installing PostgreSQL"
  apt_install postgresql
fi
if ! pg_isready -q -h 127.0.0.1 -p 5432; then
  echo "starting PostgreSQL"
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  pg_ctlcluster --skip-systemctl-redirect "$version" main start
  for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
fi
# The tests connect as postgres/postgres over TCP; a fresh Debian cluster has no password set.
if ! PGPASSWORD=postgres psql -h 127.0.0.1 -U postgres -d postgres -Atc 'select 1' >/dev/null 2>&1; then
  need_root "the postgres password"
  su postgres -c "psql -q -c \"ALTER USER postgres PASSWORD 'postgres'\""
fi

# --- Redis --------------------------------------------------------------------------------------
if ! command -v redis-server >/dev/null 2>&1; then
  echo "installing Redis"
  apt_install redis-server
fi
if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  echo "starting Redis"
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
  for _ in $(seq 1 30); do redis-cli ping >/dev/null 2>&1 && break; sleep 0.5; done
fi

# --- nginx --------------------------------------------------------------------------------------
# Only the binary: the proxy tests start their own nginx with the config docs/deploying.md gives.
if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
  echo "installing nginx"
  apt_install nginx
  # Debian's package starts a server on port 80; the tests run their own instance.
  (command -v service >/dev/null 2>&1 && service nginx stop >/dev/null 2>&1) || true
  pkill -x nginx 2>/dev/null || true
fi

# --- Chromium -----------------------------------------------------------------------------------
if ! command -v chromium >/dev/null 2>&1; then
  echo "installing Chromium"
  apt_install chromium
fi

echo "services ready: PostgreSQL $(pg_isready -h 127.0.0.1 | cut -d- -f2-), Redis $(redis-cli ping), $(/usr/sbin/nginx -v 2>&1), $(chromium --version 2>/dev/null | head -n1)"
