# The edge's benchmark target. The Makefile includes this file (`include edge.mk`).
GO ?= go

# Included near the top of the Makefile: keep bench-edge from becoming the default goal.
edge_mk_default_goal := $(.DEFAULT_GOAL)

.PHONY: bench-edge

## bench-edge: the edge's sold-out answer against a bare fasthttp server answering the same 409,
## same generator and settings, in one run (9 alternating rounds, medians), printing the ratio;
## first the allocation benchmarks of the sold-out path (2 small allocs/op: bigcache copies key and record). Needs no service.
bench-edge:
	$(GO) test -run '^$$' -bench 'SoldOutHandler|BareHandler|Extract|Lookup' -benchmem ./edge/proxy/ ./edge/orderid/ ./edge/soldout/
	$(GO) run ./loadtest compare -rounds 9 -duration 3s -warmup 500ms -conns 8

.DEFAULT_GOAL := $(edge_mk_default_goal)
