#!/usr/bin/env bash
# make run: the backend on 127.0.0.1:8080 (with make's demo voucher and admin token) and the
# edge in front of it on 127.0.0.1:8081, built once and run until Ctrl-C (or SIGTERM), which
# stops both; if one of them stops, the other is stopped too. Logs go to this terminal.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bin
go build -o bin/backend ./backend
go build -o bin/edge ./edge

# ready: the backend's /readyz answers 200 (bash's /dev/tcp: no HTTP client needed)
ready() {
  (exec 3<>/dev/tcp/127.0.0.1/8080 && printf 'GET /readyz HTTP/1.0\r\n\r\n' >&3 && head -1 <&3 | grep -q ' 200 ') 2>/dev/null
}

pids=()
stop() {
  trap - INT TERM EXIT
  [ ${#pids[@]} -gt 0 ] && kill -TERM "${pids[@]}" 2>/dev/null || true
  wait || true
}
trap stop INT TERM EXIT

bin/backend & pids+=($!)
for _ in $(seq 1 300); do # the backend migrates and warms the demo voucher first: up to 30 s
  ready && break
  kill -0 "${pids[0]}" 2>/dev/null || { echo "run: the backend stopped; see its log above" >&2; exit 1; }
  sleep 0.1
done
bin/edge & pids+=($!)
echo "run: edge on http://127.0.0.1:8081 in front of the backend on http://127.0.0.1:8080; Ctrl-C stops both" >&2
wait -n
