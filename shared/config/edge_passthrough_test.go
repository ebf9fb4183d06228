package config

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestPathTimeouts(t *testing.T) {
	c := EdgeDefaults()
	c.UpstreamTimeouts = " /api/poll/=45s, /exports/=60s/10m,/api/=5s/0 "
	got, err := c.PathTimeouts()
	if err != nil {
		t.Fatal(err)
	}
	want := []PathTimeout{
		{"/api/poll/", 45 * time.Second, 0}, {"/exports/", time.Minute, 10 * time.Minute},
		{"/api/", 5 * time.Second, 0}, {"", time.Minute, 0},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("PathTimeouts = %v; want %v (longest prefix first, the default last)", got, want)
	}
}

func TestPassThroughErrorsNameTheVariable(t *testing.T) {
	for _, tt := range []struct{ name, value string }{
		{"VG_EDGE_UPSTREAM_TIMEOUTS", "api=5s"},
		{"VG_EDGE_UPSTREAM_TIMEOUTS", "/api=soon"},
		{"VG_EDGE_UPSTREAM_TIMEOUTS", "/api=0s"},
		{"VG_EDGE_UPSTREAM_TIMEOUTS", "/api=5s/-1s"},
		{"VG_EDGE_UPSTREAM_TIMEOUTS", "/a=1s,/a=2s"},
		{"VG_EDGE_TRUSTED_PROXIES", "10.0.0.0/33"},
		{"VG_EDGE_TRUSTED_PROXIES", "lb.example"},
		{"VG_EDGE_UPSTREAM_KEEPALIVE", "0s"},
		{"VG_EDGE_UPSTREAM_READ_TIMEOUT", "0s"},
		{"VG_EDGE_STREAM_SEND_TIMEOUT", "0s"},
		{"VG_EDGE_UPSTREAM_TIMEOUT", "-1s"},
		{"VG_EDGE_UPSTREAM_MAX_HEADER_BYTES", "1024"},
		{"VG_EDGE_MAX_RESPONSE_BYTES", "10"},
		{"VG_EDGE_UPSTREAM_PROBE_PATH", "healthz"},
	} {
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			t.Setenv(tt.name, tt.value)
			_, err := LoadEdge()
			if err == nil || !strings.Contains(err.Error(), tt.name) {
				t.Fatalf("%s=%q: err = %v; want one naming the variable", tt.name, tt.value, err)
			}
		})
	}
}

func TestTrustedProxyPrefixes(t *testing.T) {
	c := EdgeDefaults()
	c.TrustedProxies = []string{"10.1.2.3/8", "192.0.2.7", "::ffff:198.51.100.0/120", "2001:db8::/32"}
	got, err := c.TrustedProxyPrefixes()
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32"),
		netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("2001:db8::/32"),
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("TrustedProxyPrefixes = %v; want %v", got, want)
	}
}

// FuzzPathTimeouts holds the parser to its own output: whatever it accepts, written back in the
// documented form, reads as the same timeouts; whatever it refuses names the variable.
func FuzzPathTimeouts(f *testing.F) {
	for _, s := range []string{"", "/a=1s", "/api/poll/=45s,/exports/=60s/10m", "/x=1s/0,/y=2m", "a=b", "/=1s", ",,", "/a=1s/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c := EdgeDefaults()
		c.UpstreamTimeouts = s
		got, err := c.PathTimeouts()
		if err != nil {
			if !strings.Contains(err.Error(), "VG_EDGE_UPSTREAM_TIMEOUTS") {
				t.Fatalf("%q: error %v does not name the variable", s, err)
			}
			return
		}
		var parts []string
		for _, pt := range got[:len(got)-1] {
			if !strings.HasPrefix(pt.Prefix, "/") || pt.Read <= 0 || pt.Total < 0 {
				t.Fatalf("%q: accepted %+v", s, pt)
			}
			parts = append(parts, fmt.Sprintf("%s=%s/%s", pt.Prefix, pt.Read, pt.Total))
		}
		c.UpstreamTimeouts = strings.Join(parts, ",")
		again, err := c.PathTimeouts()
		if err != nil || fmt.Sprint(again) != fmt.Sprint(got) {
			t.Fatalf("%q read as %v; written back as %q it reads as %v, %v", s, got, c.UpstreamTimeouts, again, err)
		}
	})
}
