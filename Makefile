# The README's two commands, `make run` and `make test`, and the targets beside them.
# Every target has a `##` line saying what it does; `make help` lists them.
GO ?= go
# make run's backend: the admin API's token and the demo flash voucher it creates at start
export VG_ADMIN_TOKEN ?= dev-admin-token
export VG_DEMO_VOUCHER ?= FLASH100

.DEFAULT_GOAL := run
.PHONY: run test test-faults test-broken-build test-cluster services db vet bench bench-edge bench-sale rehearse help

## run: start PostgreSQL, Redis and NATS if needed, then the backend (8080) with a demo flash
## voucher and the edge in front of it (8081); Ctrl-C stops both
run: services db
	@bash scripts/run.sh

## test: vet, then every test with the race detector against the servers on 127.0.0.1, then
## test-broken-build
test: services vet
	$(GO) test -race -count=1 -timeout 30m ./...
	@$(MAKE) --no-print-directory test-broken-build

## test-broken-build: prove the fault tests' history check can fail: build with the tag
## vg_early201 (a flash winner is answered 201 before its row is written), run a PostgreSQL
## fault test on it, and fail unless that test fails on its history being not linearizable
test-broken-build: services
	@out=$${TMPDIR:-/tmp}/vouchergate-broken-build.log; \
	if $(GO) test -count=1 -tags vg_early201 -run '^TestPostgresDownMidSale$$/^killed$$' ./backend/faulttest/ >$$out 2>&1; then \
		echo "test-broken-build: the broken build passed the fault test: the history check did not catch it ($$out)"; exit 1; fi; \
	grep -m1 -A10 'history not linearizable' $$out || { tail -30 $$out; \
		echo "test-broken-build: the fault test failed, but not on its history ($$out)"; exit 1; }; \
	echo "test-broken-build: the history check rejected the broken build, as it must (whole output: $$out)"

## test-faults: only the fault tests (servers killed and restarted mid-sale), with the race detector
test-faults: services
	$(GO) test -race -count=1 ./backend/faulttest/

## test-cluster: only the cluster scenarios (two edges and two backends on a replicated Redis Cluster
## and a NATS cluster: 200 vouchers at once; a Redis master, a NATS node, a backend and an edge
## SIGKILLed mid-sale; a flash voucher's and quota writes lost in a master's failover, quotas with
## each VG_QUOTA_DURABILITY),
## with the race detector; `make test` runs them too
test-cluster: services
	$(GO) test -race -count=1 -run 'Cluster' ./testkit/ ./backend/faulttest/ ./backend/quota/
	$(GO) test -race -count=1 -run 'NATSNodeKilledMidSale' ./edge/app/

## services: start PostgreSQL (5432), Redis (6379) and NATS (4222) on 127.0.0.1 unless they answer
services:
	@bash scripts/services.sh

## db: create the database vouchergate on that PostgreSQL unless it exists
db:
	@psql -h 127.0.0.1 -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'vouchergate'" | grep -q 1 || \
		psql -h 127.0.0.1 -U postgres -qc "CREATE DATABASE vouchergate"

## vet: go vet every package, then fail if gofmt would change a file
vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l .)" || { gofmt -l .; echo "gofmt: the files above need formatting"; exit 1; }

## bench: the system's benchmarks, each beside its baseline in the same run (see docs/BENCHMARKS.md)
bench: services bench-edge bench-sale
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 20000x ./backend/gate
	$(GO) test -run '^$$' -bench 'VersusRedisBenchmark|Durability' -benchtime 1x ./backend/quota
	$(GO) test -run '^$$' -bench 'HTTPVersusRedisBenchmark' -benchtime 1x ./backend/api
	$(GO) test -run '^$$' -bench 'DegradedDeducts' -benchtime 1x ./backend/api
	$(GO) test -run '^$$' -bench 'DeductReaders(Body|Handler)' -benchmem -count 3 ./backend/api
	$(GO) test -run '^$$' -bench 'ReserveKeyCheck|KeyCheck' -benchmem -benchtime 20000x -count 3 ./backend/api
	$(GO) test -run '^$$' -bench 'Lookup' -benchmem ./backend/apikeys
	$(GO) test -run '^$$' -bench 'ReserveMany|ReserveAcrossVouchers' -benchtime 400x ./backend/store
	$(GO) run ./loadtest allwin -rounds 5 -duration 3s -warmup 500ms -conns 50 -pgclients 32 -pgthreads 2
	$(GO) run ./loadtest refusals -rounds 5 -duration 3s -warmup 500ms -conns 50
	$(GO) run ./loadtest sellout -rounds 3 -uses 10000 -conns 200 -tail 1s -limit 20s

## bench-edge: the edge's sold-out answer against a bare fasthttp server answering the same 409,
## same generator and settings, in one run (9 alternating rounds, medians), printing the ratio
## against its goal (at least 0.85) and whether it is within 0.05 of 0.92, the ratio measured
## before the edge's connection and body limits (3 December 2026);
## first the allocation benchmarks of the sold-out path (the handler 2 small allocs/op: bigcache
## copies key and record; the whole server the same 2); then a checkout path through the edge
## against the same checkout API asked directly (the pass-through's cost); last what TLS adds to
## the sold-out answer. Needs no service.
bench-edge:
	$(GO) test -run '^$$' -bench 'SoldOutHandler|SoldOutServer|BareHandler|Extract|Lookup' -benchmem ./edge/proxy/ ./edge/orderid/ ./edge/soldout/
	$(GO) run ./loadtest compare -rounds 9 -duration 3s -warmup 500ms -conns 8 -baseline 0.92 -tolerance 0.05
	$(GO) run ./loadtest compare -passthrough -rounds 5 -duration 3s -warmup 500ms -conns 8
	$(GO) test -run '^$$' -bench TLSCost -benchtime 2s -count 3 ./edge/app/

## bench-sale: the voucher document's flash sale through an edge and a backend it starts itself:
## a 1,000-use voucher, 10% retries, open loop, 5 sales each with its verdict, then the medians:
## offered at 10,000/s (goal: p99 < 100 ms, sold out within 150 ms of the first request), then at
## 50,000/s; then a sale's opening right after a start: 5 times a backend and an edge started
## afresh, a first and a second sale of 1,000 uses at 2,000/s each (goal: the first's opening p99
## at most 1.5× the second's)
bench-sale: services
	$(GO) run ./loadtest salebench -rounds 5 -uses 1000 -requests 20000 -rate 10000 -retry-share 0.1 -connections 256
	$(GO) run ./loadtest salebench -rounds 5 -uses 1000 -requests 50000 -rate 50000 -retry-share 0.1 -connections 256
	$(GO) run ./loadtest salebench -starts 5 -uses 1000 -requests 10000 -rate 2000 -retry-share 0.1 -connections 256

## rehearse: a small flash sale through `make run`'s edge ($VG_EDGE_ADDR, 127.0.0.1:8081; admin on
## its backend, $VG_BACKEND_ADDR, 127.0.0.1:8080) on a new voucher, with its verdict and an HTML
## report in $TMPDIR (or /tmp); start `make run` first
rehearse:
	@bash scripts/rehearse.sh

## help: list the targets and what each does
help:
	@sed -n 's/^## //p' $(MAKEFILE_LIST)
