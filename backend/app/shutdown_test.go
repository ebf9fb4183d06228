package app_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"vouchergate/backend/backendtest"
)

// While the backend shuts down, a client on a connection it already had is still answered:
// /readyz says 503 "draining" (a load balancer stops sending) and the answer closes the
// connection; a new connection is refused; and Close returns once that client has left.
func TestReadyzAnswers503WhileClosing(t *testing.T) {
	b := backendtest.Start(t, backendtest.Config(t))
	c, err := net.Dial("tcp", b.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	r := bufio.NewReader(c)
	get := func() (*http.Response, string) {
		t.Helper()
		if _, err := io.WriteString(c, "GET /readyz HTTP/1.1\r\nHost: backend\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("read /readyz: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(body)
	}
	if resp, body := get(); resp.StatusCode != 200 || resp.Close {
		t.Fatalf("/readyz before the shutdown: %d %s (close %v)", resp.StatusCode, body, resp.Close)
	}

	b.App.API.Drain() // what Close does first; Close itself also closes the listener
	if resp, body := get(); resp.StatusCode != 503 || !strings.Contains(body, `"draining"`) || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("/readyz while draining: %d %s", resp.StatusCode, body)
	}

	closed := make(chan error, 1)
	go func() { closed <- b.App.Close() }()
	waitRefused(t, b.Addr)
	resp, body := get()
	if resp.StatusCode != 503 || !resp.Close {
		t.Fatalf("/readyz on a kept connection while closing: %d %s (close %v); want 503 closing the connection",
			resp.StatusCode, body, resp.Close)
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// waitRefused returns once a dial to addr is refused: the listener is closed.
func waitRefused(t *testing.T, addr string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return
		}
		c.Close()
	}
	t.Fatalf("%s still accepts connections while the backend closes", addr)
}
