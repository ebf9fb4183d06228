package app_test

import (
	"crypto/tls"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// go test -run '^$' -bench TLSCost -benchtime 2s -count 3 ./edge/app/
// What TLS adds to the edge's sold-out answer (docs/SCALING.md, E5): a fasthttp server behind
// tls.NewListener with the edge's TLS settings (a P-256 certificate, TLS 1.2 or later, ALPN
// http/1.1) answers a fixed 409 like the sold-out one, against the same server in plain HTTP;
// over kept-alive connections, and with a new connection (a whole handshake, no resumption) per
// request. Client and server share this process over 127.0.0.1: cpu-µs/req is both sides' CPU.
func BenchmarkTLSCost(b *testing.B) {
	certFile, keyFile, roots := selfSigned(b)
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		b.Fatal(err)
	}
	serverTLS := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	body := []byte(`{"error":"OUT_OF_STOCK","message":"the voucher is sold out"}`)
	for _, secure := range []bool{false, true} {
		for _, reuse := range []bool{true, false} {
			name := map[bool]string{false: "plain", true: "tls"}[secure] + "/" + map[bool]string{true: "keepalive", false: "handshake"}[reuse]
			b.Run(name, func(b *testing.B) {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					b.Fatal(err)
				}
				addr := ln.Addr().String()
				if secure {
					ln = tls.NewListener(ln, serverTLS)
				}
				srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
					ctx.SetStatusCode(409)
					ctx.SetContentType("application/json")
					ctx.SetBody(body)
				}}
				go srv.Serve(ln)
				defer srv.Shutdown()
				client := &fasthttp.HostClient{Addr: addr, IsTLS: secure, MaxConns: 8,
					TLSConfig: &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}}
				b.SetParallelism(4) // 8 client goroutines on 2 cores
				before := cpuTime()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
					defer fasthttp.ReleaseRequest(req)
					defer fasthttp.ReleaseResponse(resp)
					req.SetRequestURI(map[bool]string{false: "http://", true: "https://"}[secure] + addr + "/vouchers/SOLD/reservations")
					req.Header.SetMethod("POST")
					req.SetBodyString(`{"customerId":42,"orderId":"o-1","orderAmount":150000}`)
					if !reuse {
						req.SetConnectionClose()
					}
					for pb.Next() {
						if err := client.Do(req, resp); err != nil || resp.StatusCode() != 409 {
							b.Errorf("%d %v", resp.StatusCode(), err)
							return
						}
					}
				})
				b.StopTimer()
				b.ReportMetric(float64((cpuTime()-before).Microseconds())/float64(b.N), "cpu-µs/req")
			})
		}
	}
}

// cpuTime is this process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
