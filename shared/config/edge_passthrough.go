package config

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"
)

// PathTimeout bounds the checkout calls whose path starts with Prefix: Read between two bytes
// of the answer (the first included), Total the call in all (0: no bound).
type PathTimeout struct {
	Prefix      string
	Read, Total time.Duration
}

// PathTimeouts returns the checkout calls' timeouts: those of VG_EDGE_UPSTREAM_TIMEOUTS, the
// longest prefix first, then the default for every other path (VG_EDGE_UPSTREAM_READ_TIMEOUT
// and VG_EDGE_UPSTREAM_TIMEOUT) with the prefix "".
func (c Edge) PathTimeouts() ([]PathTimeout, error) {
	var out []PathTimeout
	seen := map[string]bool{}
	for entry := range strings.SplitSeq(c.UpstreamTimeouts, ",") {
		if entry = strings.TrimSpace(entry); entry == "" {
			continue
		}
		pt, err := c.parsePathTimeout(entry)
		if err != nil {
			return nil, fmt.Errorf("VG_EDGE_UPSTREAM_TIMEOUTS has %q: %v; expected PREFIX=READ or PREFIX=READ/TOTAL, comma-separated, such as /api/poll/=45s,/exports/=60s/10m", entry, err)
		}
		if seen[pt.Prefix] {
			return nil, fmt.Errorf("VG_EDGE_UPSTREAM_TIMEOUTS names %s twice; expected each prefix once", pt.Prefix)
		}
		seen[pt.Prefix] = true
		out = append(out, pt)
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i].Prefix) > len(out[j].Prefix) })
	return append(out, PathTimeout{Read: c.UpstreamReadTimeout, Total: c.UpstreamTimeout}), nil
}

func (c Edge) parsePathTimeout(entry string) (PathTimeout, error) {
	prefix, timeouts, ok := strings.Cut(entry, "=")
	if !ok || !strings.HasPrefix(prefix, "/") {
		return PathTimeout{}, fmt.Errorf("no path prefix starting with /")
	}
	read, total, hasTotal := strings.Cut(timeouts, "/")
	pt := PathTimeout{Prefix: prefix, Total: c.UpstreamTimeout}
	var err error
	if pt.Read, err = time.ParseDuration(read); err != nil || pt.Read <= 0 {
		return PathTimeout{}, fmt.Errorf("the read timeout is not a positive duration")
	}
	if hasTotal {
		if pt.Total, err = time.ParseDuration(total); err != nil || pt.Total < 0 {
			return PathTimeout{}, fmt.Errorf("the total is not a duration (0: none)")
		}
	}
	return pt, nil
}

// TrustedProxyPrefixes returns VG_EDGE_TRUSTED_PROXIES as address ranges; a bare address is a
// range of one.
func (c Edge) TrustedProxyPrefixes() ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(c.TrustedProxies))
	for _, s := range c.TrustedProxies {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("VG_EDGE_TRUSTED_PROXIES has %q; expected addresses or CIDR ranges, comma-separated, such as 10.0.0.0/8,192.0.2.7", s)
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// checkPassThrough checks the settings of the pass-through to the checkout API.
func (c Edge) checkPassThrough() error {
	switch {
	case c.UpstreamTimeout < 0:
		return fmt.Errorf("VG_EDGE_UPSTREAM_TIMEOUT is %v; expected 0 (no bound in all) or a duration such as 5m", c.UpstreamTimeout)
	case c.UpstreamReadTimeout <= 0:
		return fmt.Errorf("VG_EDGE_UPSTREAM_READ_TIMEOUT is %v; expected a positive duration such as 60s", c.UpstreamReadTimeout)
	case c.StreamSendTimeout <= 0:
		return fmt.Errorf("VG_EDGE_STREAM_SEND_TIMEOUT is %v; expected a positive duration such as 60s", c.StreamSendTimeout)
	case c.UpstreamKeepAlive <= 0:
		return fmt.Errorf("VG_EDGE_UPSTREAM_KEEPALIVE is %v; expected a positive duration below the checkout API's own idle timeout, such as 2s", c.UpstreamKeepAlive)
	case c.UpstreamMaxHeaderBytes < 4096:
		return fmt.Errorf("VG_EDGE_UPSTREAM_MAX_HEADER_BYTES is %d; expected at least 4096", c.UpstreamMaxHeaderBytes)
	case c.MaxRespBytes != 0 && c.MaxRespBytes < 1024:
		return fmt.Errorf("VG_EDGE_MAX_RESPONSE_BYTES is %d; expected 0 (no cap) or at least 1024", c.MaxRespBytes)
	case !strings.HasPrefix(c.UpstreamProbePath, "/"):
		return fmt.Errorf("VG_EDGE_UPSTREAM_PROBE_PATH is %q; expected a path such as / or /healthz", c.UpstreamProbePath)
	}
	if _, err := c.PathTimeouts(); err != nil {
		return err
	}
	_, err := c.TrustedProxyPrefixes()
	return err
}
