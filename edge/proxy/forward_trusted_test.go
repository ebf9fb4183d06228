package proxy

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
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
