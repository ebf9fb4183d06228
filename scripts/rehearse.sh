#!/usr/bin/env bash
# make rehearse: a small flash sale through make run's edge on a new voucher, its admin calls on
# make run's backend, wherever VG_EDGE_ADDR and VG_BACKEND_ADDR moved them (127.0.0.1:8081 and
# 127.0.0.1:8080 by default): the verdict on the terminal, the HTML report in $TMPDIR (or /tmp).
# Exit status: loadtest sale's (0 the verdict passed, 1 it failed, 2 it could not run).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/addr.sh

edge=$(client_addr "${VG_EDGE_ADDR:-127.0.0.1:8081}")
backend=$(client_addr "${VG_BACKEND_ADDR:-127.0.0.1:8080}")
report=${TMPDIR:-/tmp}/vouchergate-rehearsal.html
echo "rehearse: a sale through the edge on http://$edge, created through the backend on http://$backend" >&2
exec go run ./loadtest sale -target "http://$edge" -admin "http://$backend" -token "${VG_ADMIN_TOKEN:?set VG_ADMIN_TOKEN to the backend admin token}" \
  -create -code "REHEARSE-$(date +%s)" -uses 1000 -rate 2000 -requests 10000 -progress -report "$report"
