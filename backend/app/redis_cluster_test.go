package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"vouchergate/testkit"
)

func TestSlotMapStale(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
	readTimeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"no error", nil, false},
		{"key absent", redis.Nil, false},
		{"script answer", errors.New("ERR Error running script (call to f_0): @user_script:1: boom"), false},
		{"unknown script", errors.New("NOSCRIPT No matching script. Please use EVAL."), false},
		{"caller's deadline", context.DeadlineExceeded, false},
		{"caller gave up", context.Canceled, false},
		{"slot moved", errors.New("MOVED 3999 127.0.0.1:6381"), true},
		{"slot without master", errors.New("CLUSTERDOWN The cluster is down"), true},
		{"connection refused", refused, true},
		{"dial refused under the dial's deadline", fmt.Errorf("%w: %w", context.DeadlineExceeded, refused), true},
		{"read timed out", readTimeout, true},
		{"connection reset", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, true},
		{"connection closed", io.EOF, true},
		{"connection closed mid-reply", fmt.Errorf("read reply: %w", io.ErrUnexpectedEOF), true},
	} {
		if got := slotMapStale(tc.err); got != tc.want {
			t.Errorf("%s: slotMapStale(%v) = %v; want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// A call refused by a dead master makes the client reload its slot map, and a storm of failed
// calls reloads it at most once per slotMapReloadEvery.
func TestFailedCallsReloadTheSlotMap(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().(*net.TCPAddr)
	ln.Close() // nothing listens there now: every dial is refused
	var loads atomic.Int64
	c := redis.NewClusterClient(&redis.ClusterOptions{
		ClusterSlots: func(context.Context) ([]redis.ClusterSlot, error) {
			loads.Add(1)
			return []redis.ClusterSlot{{Start: 0, End: 16383, Nodes: []redis.ClusterNode{{Addr: dead.String()}}}}, nil
		},
		MaxRetries: -1, MaxRedirects: -1, DialerRetries: 1, // as openRedis: one dial per call
	})
	defer c.Close()
	c.AddHook(newSlotMapReloader(c))
	ctx := context.Background()

	if err := c.Get(ctx, "k").Err(); !slotMapStale(err) {
		t.Fatalf("GET on a dead master: %v; want a refused dial", err)
	}
	testkit.Eventually(t, "a refused call reloaded the slot map", func() bool { return loads.Load() >= 2 })

	before, started, calls := loads.Load(), time.Now(), 0
	for time.Since(started) < 3*slotMapReloadEvery {
		_ = c.Get(ctx, "k").Err()
		calls++
	}
	// One load may be in flight from before the storm; the rest are bound by the limiter.
	if n, most := loads.Load()-before, int64(time.Since(started)/slotMapReloadEvery)+2; n > most {
		t.Errorf("%d refused calls in %s loaded the slot map %d times; want at most %d", calls, time.Since(started), n, most)
	}
}
