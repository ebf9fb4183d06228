package testkit

import (
	"strings"
	"testing"
)

// RequirePathIDsRefused sends confirms and releases of voucher code whose orderId path
// segment breaks the id rule (a C1 control character, U+FFFD, a byte that is not UTF-8), each
// percent-encoded as a client would send it, to addr over a raw connection, and fails the test
// unless each is answered 400 naming orderId and the rule it breaks.
func RequirePathIDsRefused(t testing.TB, addr, code string) {
	t.Helper()
	for _, c := range []struct{ name, seg, rule string }{
		{"C1 NEL", "M-%C2%85", "control"},
		{"U+FFFD", "M-%EF%BF%BD", "UTF-8"},
		{"byte 0xff", "M-%FF", "UTF-8"},
	} {
		for _, req := range []string{
			"POST /vouchers/" + code + "/reservations/" + c.seg + "/confirm HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
			"DELETE /vouchers/" + code + "/reservations/" + c.seg + " HTTP/1.1\r\nHost: x\r\n\r\n",
		} {
			status, got := RawHTTP(t, addr, req)
			if status != 400 || !strings.Contains(got, "orderId") || !strings.Contains(got, c.rule) {
				t.Errorf("path orderId %s: %d %s; want 400 naming orderId and %q", c.name, status, got, c.rule)
			}
		}
	}
}
