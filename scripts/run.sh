#!/usr/bin/env bash
# make run: the backend on $VG_BACKEND_ADDR (127.0.0.1:8080, with make's demo voucher and admin
# token; its metrics on $VG_BACKEND_OPS_ADDR, 127.0.0.1:9080) and the edge in front of it on
# $VG_EDGE_ADDR (127.0.0.1:8081, its metrics on $VG_EDGE_OPS_ADDR, 127.0.0.1:9081), built as
# the Dockerfile builds them and run until Ctrl-C
# (or SIGTERM), which stops both; if one of them stops, the other is stopped too. Logs go to
# this terminal.
#
# Each process gets exactly one signal. Ctrl-C reaches the terminal's whole process group; the
# two processes run in sessions of their own (setsid), so only this script hears it, and it
# sends SIGTERM to the edge, waits for it, then to the backend (a second signal would end a
# process at once, without its graceful shutdown). The edge goes first so that nothing it
# forwards finds the backend draining.
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/addr.sh

backend_addr=${VG_BACKEND_ADDR:-127.0.0.1:8080}
edge_addr=${VG_EDGE_ADDR:-127.0.0.1:8081}
ops_addr=${VG_EDGE_OPS_ADDR:-127.0.0.1:9081}
backend_ops_addr=${VG_BACKEND_OPS_ADDR:-127.0.0.1:9080}
export VG_EDGE_BACKENDS=${VG_EDGE_BACKENDS:-$backend_addr}

# Every port must be free before anything is built or migrated: a process already answering on
# the backend's port would pass for the backend (its /readyz), and the edge would be sent to it.
for setting in "VG_BACKEND_ADDR=$backend_addr" "VG_BACKEND_OPS_ADDR=$backend_ops_addr" \
  "VG_EDGE_ADDR=$edge_addr" "VG_EDGE_OPS_ADDR=$ops_addr"; do
  addr=${setting#*=}
  [ "$addr" = off ] && continue
  if answers "$addr"; then
    echo "run: $addr (${setting%%=*}) is already taken by another process; stop it, or move make run elsewhere with ${setting%%=*}=host:port" >&2
    exit 1
  fi
done

mkdir -p bin
echo "run: building bin/backend and bin/edge (the first build downloads the modules and compiles everything: a few minutes)" >&2
go build -trimpath -ldflags "-s -w" -o bin/backend ./backend
go build -trimpath -ldflags "-s -w" -o bin/edge ./edge
echo "run: starting the backend on http://$backend_addr (it migrates the database first)" >&2

# ready: the backend's /readyz answers 200 (bash's /dev/tcp: no HTTP client needed)
ready() {
  (exec 3<>"/dev/tcp/$(dialable "$backend_addr")" && printf 'GET /readyz HTTP/1.0\r\n\r\n' >&3 && head -1 <&3 | grep -q ' 200 ') 2>/dev/null
}

backend_pid='' edge_pid=''
# stop: SIGTERM to the edge, then the backend, each waited for; exits with $1, or else the
# first failing process's status.
stop() {
  local status=$1 pid s
  # A second Ctrl-C while they drain stops them at once (they run in sessions of their own: a
  # signal to this script's group no longer reaches them). A second SIGTERM is ignored: make
  # passes on the SIGTERM its group got, so this script hears one twice.
  trap 'kill -KILL $edge_pid $backend_pid 2>/dev/null' INT
  trap '' TERM
  trap - EXIT
  for pid in $edge_pid $backend_pid; do
    kill -TERM "$pid" 2>/dev/null || true
    s=0
    wait "$pid" 2>/dev/null || s=$?
    # 127: already reaped by wait -n below, its status taken there
    if [ "$s" -ne 0 ] && [ "$s" -ne 127 ] && [ "$status" -eq 0 ]; then status=$s; fi
  done
  exit "$status"
}
trap 'stop 0' INT TERM
trap 'stop $?' EXIT

setsid bin/backend &
backend_pid=$!
for _ in $(seq 1 300); do # the backend migrates and warms the demo voucher first: up to 30 s
  ready && break
  kill -0 "$backend_pid" 2>/dev/null || { echo "run: the backend stopped; see its log above" >&2; exit 1; }
  sleep 0.1
done
setsid bin/edge &
edge_pid=$!
echo "run: edge on http://$edge_addr (metrics on http://$ops_addr) in front of the backend on http://$backend_addr (metrics on http://$backend_ops_addr); Ctrl-C stops both" >&2
status=0
wait -n || status=$?
echo "run: a process stopped (status $status); stopping the other" >&2
stop "$status"
