package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"
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
