package testkit

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The server closes the cut connection before its answer is complete (here it ends its own
// session, answering with a FATAL and no ReadyForQuery): Settled is closed all the same, so a
// test waiting on it goes on instead of hanging.
func TestCutProxySettlesWhenTheServerClosesTheConnection(t *testing.T) {
	ctx := testContext(t)
	proxy := StartCutProxy(t, "127.0.0.1:5432")
	conn, err := pgx.Connect(ctx, proxy.URL(Database(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })

	proxy.CutOnce("pg_terminate_backend")
	if _, err := conn.Exec(ctx, "SELECT pg_terminate_backend(pg_backend_pid())"); err == nil {
		t.Error("the session ended itself, and its statement answered no error")
	}
	select {
	case <-proxy.Settled():
	case <-time.After(10 * time.Second):
		t.Fatal("Settled still open 10 s after the server closed the cut connection")
	}
	if proxy.Cuts() != 1 {
		t.Errorf("the proxy cut %d connections, want 1", proxy.Cuts())
	}
}
