package testkit

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// RawHTTP writes raw, one HTTP/1.1 request exactly as given (a path no client would send
// unchanged, bytes no client would encode), to addr on a new connection and returns the status
// and body of the one answer. A connection the server closes without an answer fails the test.
func RawHTTP(t testing.TB, addr, raw string) (int, string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatalf("write to %s: %v", addr, err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("read the answer to %q from %s: %v", raw, addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read the body of the answer to %q: %v", raw, err)
	}
	return resp.StatusCode, string(body)
}
