package proxy

import (
	"github.com/valyala/fasthttp"
)

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
