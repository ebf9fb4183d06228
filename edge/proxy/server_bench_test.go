package proxy

import (
	"bufio"
	"strconv"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"
)

// BenchmarkSoldOutServer is the sold-out answer through the edge's whole server, over an
// in-memory connection: reading the request (header, streamed body), the handler, writing the
// 409. One keep-alive connection, one request in flight. Without the network and the load
// generator it shows what the server's settings cost per request.
func BenchmarkSoldOutServer(b *testing.B) {
	p := benchProxy(b)
	srv := NewServer(p, ServerOptions{ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second,
		IdleTimeout: time.Minute, MaxHeaderBytes: 8192, MaxBodyBytes: 1 << 20})
	ln := fasthttputil.NewInmemoryListener()
	go srv.Serve(ClientListener(ln, Caps{MaxConns: 4096, MaxConnsPerIP: 512})) //nolint:errcheck
	defer srv.Shutdown()                                                       //nolint:errcheck
	c, err := ln.Dial()
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	body := `{"customerId":"customer-000042","orderId":"late-order-0000000042","orderAmount":150000}`
	req := []byte("POST /vouchers/FLASH/reservations HTTP/1.1\r\nHost: edge.test\r\nContent-Type: application/json\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	br := bufio.NewReader(c)
	var resp fasthttp.Response
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		if err := resp.Read(br); err != nil {
			b.Fatal(err)
		}
		if resp.StatusCode() != 409 {
			b.Fatalf("status %d", resp.StatusCode())
		}
	}
}
