#!/usr/bin/env bash
# Makes sure PostgreSQL (5432), Redis (6379) and NATS with JetStream (4222) answer on 127.0.0.1.
# A server that is not reachable is started from the installed binaries with its data under
# .data/ (git-ignored). Without --install, a missing binary is named with the package to install.
# With --install (CI: .ci/run), every binary the tests run is installed with apt-get first, also
# for a server that already answers: the fault tests start servers of their own from them, and
# configs/'s tests check the operating files with docker-compose, promtool and amtool and scrape
# a backend, an edge and redis_exporter with a real prometheus. Without it, each missing one of
# those is named as optional with its package, and the servers start: `make run` does not need
# them.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA="$PWD/.data"
install=no
[ "${1:-}" = "--install" ] && install=yes

up() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_up() { # port name
  for _ in $(seq 1 100); do up "$1" && return 0; sleep 0.1; done
  echo "services: $2 did not start on 127.0.0.1:$1; see $DATA/$2.log" >&2
  exit 1
}

apt_install() { # apt-package; says so on stderr, as pg_bin's output is a path
  echo "services: installing $1" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1" >/dev/null
}

need() { # binary apt-package
  command -v "$1" >/dev/null 2>&1 && return 0
  if [ "$install" = yes ]; then
    apt_install "$2"
    command -v "$1" >/dev/null 2>&1 && return 0
  fi
  echo "services: $1 is not installed; install it with: apt-get install $2" >&2
  exit 1
}

pg_bin() { # find a PostgreSQL server binary on PATH or in Debian's versioned folders
  local found
  found=$(command -v "$1" 2>/dev/null || ls -d /usr/lib/postgresql/*/bin/"$1" 2>/dev/null | sort -V | tail -1 || true)
  [ -n "$found" ] && { echo "$found"; return; }
  if [ "$install" = yes ]; then
    apt_install postgresql
    ls -d /usr/lib/postgresql/*/bin/"$1" 2>/dev/null | sort -V | tail -1
    return
  fi
  echo "services: PostgreSQL's $1 is not installed; install it with: apt-get install postgresql" >&2
  exit 1
}

start_postgres() {
  up 5432 && return 0
  local initdb pgctl as=()
  initdb=$(pg_bin initdb); pgctl=$(pg_bin pg_ctl)
  mkdir -p "$DATA"
  if [ "$(id -u)" = 0 ]; then # PostgreSQL refuses to run as root
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
    as=(runuser -u postgres --)
  fi
  if [ ! -s "$DATA/postgres/PG_VERSION" ]; then
    mkdir -p "$DATA/postgres"
    [ "$(id -u)" = 0 ] && chown postgres "$DATA/postgres"
    "${as[@]}" "$initdb" -D "$DATA/postgres" -U postgres --auth=trust >/dev/null
  fi
  touch "$DATA/postgres.log"; [ "$(id -u)" = 0 ] && chown postgres "$DATA/postgres.log"
  "${as[@]}" "$pgctl" -D "$DATA/postgres" -l "$DATA/postgres.log" -w \
    -o "-c listen_addresses=127.0.0.1 -c port=5432 -c unix_socket_directories=$DATA/postgres -c max_connections=300" start >/dev/null
  wait_up 5432 postgres
}

start_redis() {
  up 6379 && return 0
  need redis-server redis-server
  mkdir -p "$DATA/redis"
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
    --dir "$DATA/redis" --pidfile "$DATA/redis/redis.pid" --logfile "$DATA/redis.log"
  wait_up 6379 redis
}

start_nats() {
  up 4222 && return 0
  need nats-server nats-server
  mkdir -p "$DATA/nats"
  nohup setsid nats-server -a 127.0.0.1 -p 4222 -js -sd "$DATA/nats" -P "$DATA/nats/nats.pid" \
    >"$DATA/nats.log" 2>&1 &
  wait_up 4222 nats
}

# configs/'s tests: docker-compose config, promtool and amtool checks, a real prometheus and
# redis_exporter; binary:apt-package
ops_tools=(docker-compose:docker-compose prometheus:prometheus promtool:prometheus
  amtool:prometheus-alertmanager prometheus-redis-exporter:prometheus-redis-exporter)

need_ops_tools() {
  local t
  for t in "${ops_tools[@]}"; do need "${t%%:*}" "${t#*:}"; done
}

name_missing_ops_tools() { # without --install: each one missing, named as optional
  local t
  for t in "${ops_tools[@]}"; do
    command -v "${t%%:*}" >/dev/null 2>&1 ||
      echo "services: optional: ${t%%:*} is not installed; only go test ./configs/ needs it, make run does not (apt-get install ${t#*:})" >&2
  done
}

install_test_binaries() { # every server binary and client the tests run (testkit, faulttest)
  need redis-server redis-server
  need redis-cli redis-tools
  need nats-server nats-server
  need psql postgresql-client
  need iptables iptables # the quota durability test cuts a replica's link on loopback
  pg_bin pg_ctl >/dev/null
  pg_bin initdb >/dev/null
  need_ops_tools
  # loadtest/sale renders its HTML report in headless Chromium; that test skips without it
  command -v chromium >/dev/null 2>&1 || apt_install chromium ||
    echo "services: chromium could not be installed; loadtest/sale's rendering test will skip" >&2
}

if [ "$install" = yes ]; then
  install_test_binaries
else
  name_missing_ops_tools
fi
start_postgres
start_redis
start_nats
echo "services: PostgreSQL 127.0.0.1:5432, Redis 127.0.0.1:6379 and NATS 127.0.0.1:4222 are up"
