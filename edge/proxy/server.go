package proxy

import (
	"time"

	"github.com/valyala/fasthttp"

	"vouchergate/shared/httplog"
)

// ServerOptions bound what a client may send and how long it may take.
type ServerOptions struct {
	ReadTimeout    time.Duration // reading one request, header and body
	WriteTimeout   time.Duration // writing one answer
	IdleTimeout    time.Duration // a kept-alive connection between requests
	MaxHeaderBytes int           // a request's header (fasthttp's read buffer)
	MaxBodyBytes   int           // any request's body
}

// NewServer returns a fasthttp server running p, whose malformed, slow or oversized requests
// get JSON 4xx answers. A body is read up to its route's limit, a large one only with room in
// p's body budget (body.go). Serve it on ClientListener(ln, caps), which bounds the
// connections it holds.
func NewServer(p *Proxy, o ServerOptions) *fasthttp.Server {
	return &fasthttp.Server{
		Handler:               p.Handle,
		ErrorHandler:          p.ReadFailure,
		Logger:                httplog.New(p.log, httplog.Every, nil), // never the request's bytes
		SecureErrorLogMessage: true,
		Name:                  "vouchergate-edge",
		ReadTimeout:           o.ReadTimeout,
		WriteTimeout:          o.WriteTimeout,
		IdleTimeout:           o.IdleTimeout,
		ReadBufferSize:        o.MaxHeaderBytes,
		MaxRequestBodySize:    o.MaxBodyBytes,
		NoDefaultServerHeader: true,
		NoDefaultContentType:  true,
		CloseOnShutdown:       true,

		// What a client may make the edge hold (issue 12).
		// A multipart body would be read, into temporary files, before the handler could refuse it.
		DisablePreParseMultipartForm: true,
		ExpectHandler:                p.Expect,
		HeaderReceived:               p.HeaderReceived,
		ConnState:                    connState, // idle connections make room near the cap (idle.go)
	}
}
