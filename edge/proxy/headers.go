package proxy

import (
	"bytes"
	"net"
	"net/netip"

	"github.com/valyala/fasthttp"

	"vouchergate/shared/wire"
)

// What the edge writes of a client's header upstream. A header whose name is not a token
// (RFC 9110 §5.1: "X Foo", "Transfer Encoding") or a target with user information
// ("http://user:pass@host/", which fasthttp would turn into an Authorization header) is
// refused with 400. Headers only the edge may set are dropped, with their look-alikes that
// have '_' for '-' (X_Forwarded_For, Content_Length), which some servers and frameworks read
// as the real ones. Host is the target's (the absolute form's authority, or the Host header),
// and X-Forwarded-Host, X-Forwarded-Proto and X-Real-Ip say what the client asked and from where;
// the edge sets them after removing hop-by-hop headers, so a client cannot name them away.

// edgeOwned are the headers a client may not pass on as they are: the edge sets them, or the
// framing of the upstream request is the edge's.
var edgeOwned = []string{
	"X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-Ip", "Forwarded", HeaderSubject, HeaderIdentities,
}

// lookAlikes are the names whose '_' spellings are dropped.
var lookAlikes = append(append([]string{
	"Content-Length", "Host", "X-Forwarded-For", "X-Request-Id",
}, edgeOwned...), hopByHop...)

const (
	headerForwardedHost  = "X-Forwarded-Host"
	headerForwardedProto = "X-Forwarded-Proto"
	headerRealIP         = "X-Real-Ip"
	maxHostLen           = 255
)

// upstreamHeader checks h, a copy of the client's header, and drops the look-alikes of the
// edge's headers, or returns the status, code and message to refuse the request with. The
// edge's own headers are set after hop-by-hop removal (forwardingHeaders), so that a client's
// Connection header cannot name them away.
func (p *Proxy) upstreamHeader(ctx *fasthttp.RequestCtx, h *fasthttp.RequestHeader) (status int, code, message string) {
	uri := ctx.URI()
	if len(uri.Username()) > 0 || len(uri.Password()) > 0 || targetHasUserinfo(ctx.Request.Header.RequestURI()) {
		return fasthttp.StatusBadRequest, wire.CodeBadRequest, "the request target must not hold user information"
	}
	if !validHost(uri.Host()) {
		return fasthttp.StatusBadRequest, wire.CodeBadRequest, "the host must be a host name or address with an optional port"
	}
	var drop [8][]byte
	names := drop[:0]
	for name := range h.All() {
		if !isToken(name) {
			return fasthttp.StatusBadRequest, wire.CodeBadRequest, "header names must be tokens (RFC 9110 section 5.6.2)"
		}
		if bytes.IndexByte(name, '_') >= 0 && isLookAlike(name) {
			names = append(names, append([]byte(nil), name...)) // the header's storage moves as we delete
		}
	}
	for _, name := range names {
		h.DelBytes(name)
	}
	return 0, "", ""
}

// forwardingHeaders sets what the edge says of the request, after hop-by-hop removal: Host
// (the target's), X-Forwarded-Host, X-Forwarded-Proto, X-Forwarded-For and X-Real-Ip. From a
// trusted proxy (Options.TrustedProxies) its X-Forwarded-Host and X-Forwarded-Proto are kept
// when it sent them, its Forwarded gets the edge's element appended as X-Forwarded-For gets
// the hop, and X-Real-Ip is the nearest address in the chain that is not a trusted proxy's;
// from anyone else they are replaced (Forwarded dropped).
func (p *Proxy) forwardingHeaders(ctx *fasthttp.RequestCtx, h *fasthttp.RequestHeader) {
	hop, hopIsIP := remoteIP(ctx)
	trusted := hopIsIP && p.trusts(hop)
	if trusted {
		h.Del(headerRealIP)
		h.Del(HeaderSubject)
		h.Del(HeaderIdentities)
	} else {
		for _, name := range edgeOwned {
			h.Del(name)
		}
	}
	if host := ctx.URI().Host(); len(host) > 0 {
		h.SetHostBytes(host)
		if !trusted || len(h.Peek(headerForwardedHost)) == 0 {
			h.SetBytesV(headerForwardedHost, host)
		}
	}
	if !trusted || len(h.Peek(headerForwardedProto)) == 0 {
		if ctx.IsTLS() {
			h.Set(headerForwardedProto, "https")
		} else {
			h.Set(headerForwardedProto, "http")
		}
	}
	realIP := hop
	if trusted {
		realIP = p.nearestUntrusted(h, hop)
		appendForwarded(h, hop)
	}
	appendForwardedFor(h, ctx.RemoteAddr())
	if hopIsIP {
		var buf [64]byte
		h.SetBytesV(headerRealIP, realIP.AppendTo(buf[:0]))
	}
}

// appendForwarded adds the edge's element, for= the hop the request came from, to a Forwarded
// chain a trusted proxy sent (RFC 7239 §4), so that it names the same hops as X-Forwarded-For.
// An IPv6 address is quoted in brackets (§6). Without a chain it adds none: the edge speaks
// X-Forwarded-* of its own.
func appendForwarded(h *fasthttp.RequestHeader, hop netip.Addr) {
	prior := h.PeekAll("Forwarded")
	if len(prior) == 0 {
		return
	}
	var buf [256]byte
	v := buf[:0]
	for _, p := range prior {
		if p = bytes.TrimSpace(p); len(p) > 0 {
			v = append(v, p...)
			v = append(v, ", "...)
		}
	}
	v = append(v, "for="...)
	if hop.Is6() {
		v = append(v, `"[`...)
		v = hop.AppendTo(v)
		v = append(v, `]"`...)
	} else {
		v = hop.AppendTo(v)
	}
	h.Del("Forwarded")
	h.SetBytesV("Forwarded", v)
}

// remoteIP is the address of the connection's far end: the client, or the proxy before the edge.
func remoteIP(ctx *fasthttp.RequestCtx) (netip.Addr, bool) {
	tcp, ok := ctx.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	return tcp.AddrPort().Addr().Unmap(), true
}

// trusts reports whether a is one of the trusted proxies'.
func (p *Proxy) trusts(a netip.Addr) bool {
	for _, pfx := range p.opts.TrustedProxies {
		if pfx.Contains(a) {
			return true
		}
	}
	return false
}

// nearestUntrusted walks the X-Forwarded-For chain a trusted hop sent from its end and returns
// the first address that is not a trusted proxy's: the client as the nearest trusted proxy saw
// it. A chain of trusted proxies only gives its first address; an entry that is not an address
// ends the walk at the address before it.
func (p *Proxy) nearestUntrusted(h *fasthttp.RequestHeader, hop netip.Addr) netip.Addr {
	all := h.PeekAll("X-Forwarded-For")
	nearest := hop
	for i := len(all) - 1; i >= 0; i-- {
		v := all[i]
		for len(v) > 0 {
			var entry []byte
			if j := bytes.LastIndexByte(v, ','); j >= 0 {
				entry, v = v[j+1:], v[:j]
			} else {
				entry, v = v, nil
			}
			a, err := netip.ParseAddr(string(bytes.TrimSpace(entry)))
			if err != nil {
				return nearest
			}
			nearest = a.Unmap()
			if !p.trusts(nearest) {
				return nearest
			}
		}
	}
	return nearest
}

// checkHeaderSize refuses, with 431, a request whose header as written upstream would be larger
// than the backend reads: the client's header fits the edge's limit, but the edge writes each
// line again in canonical form ("a:b" becomes "A: b") and adds its own.
func (p *Proxy) checkHeaderSize(req *fasthttp.Request) (status int, code, message string) {
	if p.opts.MaxUpstreamHead <= 0 {
		return 0, "", ""
	}
	// The request line as it will be written: the parsed target, in origin form.
	n := len(req.Header.Header()) - len(req.Header.RequestURI()) + len(req.URI().RequestURI())
	if n > p.opts.MaxUpstreamHead {
		return fasthttp.StatusRequestHeaderFieldsTooLarge, CodeHeaderTooLarge, "the request header is larger than the limit"
	}
	return 0, "", ""
}

// targetHasUserinfo reports whether an absolute-form target's authority holds an '@'.
func targetHasUserinfo(target []byte) bool {
	i := bytes.Index(target, []byte("://"))
	if i < 0 || bytes.IndexByte(target[:i], '/') >= 0 {
		return false
	}
	authority := target[i+3:]
	if end := bytes.IndexAny(authority, "/?#"); end >= 0 {
		authority = authority[:end]
	}
	return bytes.IndexByte(authority, '@') >= 0
}

// validHost accepts a reg-name, IPv4 or bracketed IPv6 address with an optional port, in at
// most 255 bytes: letters, digits and -._~:[]%.
func validHost(h []byte) bool {
	if len(h) > maxHostLen {
		return false
	}
	for _, c := range h {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == ':' || c == '[' || c == ']' || c == '%') {
			return false
		}
	}
	return true
}

// tokenChar marks the bytes of an RFC 9110 token.
var tokenChar = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

func isToken(name []byte) bool {
	if len(name) == 0 {
		return false
	}
	for _, c := range name {
		if !tokenChar[c] {
			return false
		}
	}
	return true
}

// isLookAlike reports whether name, with '_' read as '-', is one of lookAlikes.
func isLookAlike(name []byte) bool {
	for _, want := range lookAlikes {
		if len(want) != len(name) {
			continue
		}
		same := true
		for i := range name {
			c := name[i]
			if c == '_' {
				c = '-'
			}
			if lower(c) != lower(want[i]) {
				same = false
				break
			}
		}
		if same {
			return true
		}
	}
	return false
}

func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
