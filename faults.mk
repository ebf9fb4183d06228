# Fault tests: flash sales with Redis, PostgreSQL, NATS or a backend failing mid-sale.
# Include from the Makefile (`include faults.mk`); they use the shared servers `services` starts
# and start their own throwaway servers on free 127.0.0.1 ports.
GO ?= go

.PHONY: test-faults

## test-faults: only the fault tests (backend/faulttest), with the race detector
test-faults: services
	$(GO) test -race -count=1 ./backend/faulttest/
