package proxy

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"vouchergate/testkit"
)

// nearestUntrustedOracle is nearestUntrusted written the plain way: split the chain, walk it
// from its end.
func nearestUntrustedOracle(p *Proxy, chain []string, hop netip.Addr) netip.Addr {
	var all []string
	for _, v := range chain {
		if v != "" { // an empty header holds no entry
			all = append(all, strings.Split(v, ",")...)
		}
	}
	nearest := hop
	for i := len(all) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(all[i]))
		if err != nil {
			return nearest
		}
		if nearest = a.Unmap(); !p.trusts(nearest) {
			return nearest
		}
	}
	return nearest
}

// FuzzNearestUntrusted holds the X-Forwarded-For walk, which reads what a client may have
// written, to the plain version of it.
func FuzzNearestUntrusted(f *testing.F) {
	for _, s := range []string{"203.0.113.9, 10.1.2.3", "10.0.0.1", "", "junk, 10.0.0.2", "1.2.3.4,,10.0.0.3", "::ffff:10.0.0.4, 2001:db8::1", " , "} {
		f.Add(s, "10.9.9.9")
	}
	p := New(Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::/32")}})
	f.Fuzz(func(t *testing.T, xff, second string) {
		var h fasthttp.RequestHeader
		var chain []string
		for _, v := range []string{xff, second} {
			if v == "" || strings.ContainsAny(v, "\r\n") {
				continue
			}
			h.Add("X-Forwarded-For", v)
		}
		for _, v := range h.PeekAll("X-Forwarded-For") {
			chain = append(chain, string(v))
		}
		hop := netip.MustParseAddr("10.255.0.1")
		if got, want := p.nearestUntrusted(&h, hop), nearestUntrustedOracle(p, chain, hop); got != want {
			t.Fatalf("chain %q: nearestUntrusted = %v; the plain walk says %v", chain, got, want)
		}
	})
}

// From a trusted proxy (a TLS load balancer) X-Forwarded-Proto and -Host pass as it set them,
// its X-Forwarded-For and Forwarded chains get the same hop appended, and X-Real-Ip names the
// client it saw; from anyone else they are the edge's own. What the checkout API process
// received is what it echoes. (Before: always the edge's: https from the balancer became http;
// then Forwarded passed as sent, one hop short of X-Forwarded-For.)
func TestForwardingHeadersFromTrustedProxiesOnly(t *testing.T) {
	up := testkit.StartCheckoutStandIn(t, 0)
	raw := "GET /headers HTTP/1.1\r\nHost: shop.example\r\nX-Forwarded-Proto: https\r\nX-Forwarded-Host: www.shop.example\r\n" +
		"X-Forwarded-For: 203.0.113.9, 10.1.2.3\r\nForwarded: for=203.0.113.9;proto=https\r\nX-Real-Ip: 6.6.6.6\r\n\r\n"
	for _, tt := range []struct {
		name    string
		trusted []netip.Prefix
		want    map[string]string
	}{
		{"untrusted", nil, map[string]string{
			"x-forwarded-proto": "http", "x-forwarded-host": "shop.example", "forwarded": "",
			"x-forwarded-for": "203.0.113.9, 10.1.2.3, 127.0.0.1", "x-real-ip": "127.0.0.1",
		}},
		{"trusted", []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("10.0.0.0/8")}, map[string]string{
			"x-forwarded-proto": "https", "x-forwarded-host": "www.shop.example", "forwarded": "for=203.0.113.9;proto=https, for=127.0.0.1",
			"x-forwarded-for": "203.0.113.9, 10.1.2.3, 127.0.0.1", "x-real-ip": "203.0.113.9",
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := passThroughEdge(t, up.Addr, edgeConfig{trusted: tt.trusted})
			status, body := testkit.RawHTTP(t, e.addr, raw)
			var got map[string]string
			if err := json.Unmarshal([]byte(body), &got); status != 200 || err != nil {
				t.Fatalf("answer %d %s (%v)", status, body, err)
			}
			for name, want := range tt.want {
				if got[name] != want {
					t.Errorf("upstream %s: %q; want %q", name, got[name], want)
				}
			}
			if got["host"] != "shop.example" {
				t.Errorf("upstream Host %q", got["host"])
			}
		})
	}
}

// The edge's Forwarded element: after the chain a trusted proxy sent, in one header however many
// lines it came in, an IPv6 hop quoted in brackets; none without a chain.
func TestAppendForwarded(t *testing.T) {
	for _, tt := range []struct {
		sent []string
		hop  string
		want string
	}{
		{[]string{"for=203.0.113.9;proto=https"}, "10.0.0.5", "for=203.0.113.9;proto=https, for=10.0.0.5"},
		{[]string{"for=192.0.2.1", " for=192.0.2.2 "}, "10.0.0.5", "for=192.0.2.1, for=192.0.2.2, for=10.0.0.5"},
		{[]string{`for="[2001:db8::1]"`}, "2001:db8::7", `for="[2001:db8::1]", for="[2001:db8::7]"`},
		{nil, "10.0.0.5", ""},
	} {
		var h fasthttp.RequestHeader
		for _, v := range tt.sent {
			h.Add("Forwarded", v)
		}
		appendForwarded(&h, netip.MustParseAddr(tt.hop))
		if got := h.PeekAll("Forwarded"); len(got) > 1 || string(h.Peek("Forwarded")) != tt.want {
			t.Errorf("Forwarded %q from %s: %q; want %q in one header", tt.sent, tt.hop, got, tt.want)
		}
	}
}
