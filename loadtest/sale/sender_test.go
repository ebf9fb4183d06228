package sale

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"vouchergate/loadtest/load"
	"vouchergate/testkit"
)

func soldOutAnswer(ctx *fasthttp.RequestCtx) {
	ctx.SetStatusCode(409)
	ctx.SetContentType("application/json")
	ctx.SetBodyString(`{"error":"OUT_OF_STOCK","message":"no uses left"}`)
}

func fixedRequest(i int, req *fasthttp.Request, buf []byte) []byte {
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURI("/vouchers/X/reservations")
	return buf
}

// TestSenderIsAnOpenLoop: while a stalled server holds the only connection's request, the
// sender keeps releasing the requests that fall due; once the server answers, every request
// is answered and its latency counts from its scheduled time.
func TestSenderIsAnOpenLoop(t *testing.T) {
	stall := make(chan struct{})
	addr, _ := testkit.ServeHTTP(t, func(ctx *fasthttp.RequestCtx) {
		<-stall
		soldOutAnswer(ctx)
	})
	m := newMeter()
	const n = 50
	done := make(chan []Outcome)
	go func() {
		done <- newSender(addr, false, 1, 30*time.Second, m).offer(context.Background(), n, 10_000, fixedRequest)
	}()
	testkit.Eventually(t, "every request released while the server stalls", func() bool { return m.released.Load() == n })
	close(stall)
	out := <-done
	for i, o := range out {
		if o.State != Answered || o.Status != 409 || o.Error != "OUT_OF_STOCK" {
			t.Fatalf("request %d: %+v", i, o)
		}
		if want := time.Duration(i) * time.Second / 10_000; o.Scheduled != want || o.Sent < o.Scheduled || o.Latency() < o.Done-o.Sent {
			t.Fatalf("request %d scheduled at %v (want %v), sent at %v, done at %v", i, o.Scheduled, want, o.Sent, o.Done)
		}
	}
}

func TestSenderCountsRequestsWithNoAnswer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	out := newSender(addr, false, 2, time.Second, nil).offer(context.Background(), 3, 1000, fixedRequest)
	for i, o := range out {
		if o.State != Failed || o.Key() == "" {
			t.Errorf("request %d to a closed port: %+v", i, o)
		}
	}
}

// BenchmarkOpenLoop offers one second of requests at each rate to a bare fasthttp server
// answering 409 in the same process, and reports the rate they were sent at, how late the
// 99th percentile left, the answers' p99, and the cores the process took (generator and
// server): what the generator can offer on this machine. Run with -benchtime 1x.
func BenchmarkOpenLoop(b *testing.B) {
	addr, _ := testkit.ServeHTTP(b, soldOutAnswer)
	for _, rate := range []int{10_000, 20_000, 30_000, 40_000, 50_000, 60_000} {
		b.Run(fmt.Sprintf("rate=%d", rate), func(b *testing.B) {
			h := &History{Rate: float64(rate), Plan: make([]Planned, rate)}
			for range b.N {
				cpu := load.SelfCPU()
				h.Reservations = newSender(addr, false, 64, 10*time.Second, nil).offer(context.Background(), len(h.Plan), h.Rate, fixedRequest)
				h.GeneratorCPU = load.SelfCPU() - cpu
			}
			s := Summarize(h, Verdict{})
			b.ReportMetric(s.OfferedRate, "sent/s")
			b.ReportMetric(s.SendLateP99Ms, "late-p99-ms")
			b.ReportMetric(s.Latency.P99, "p99-ms")
			b.ReportMetric(s.GeneratorCores, "cores")
			b.ReportMetric(float64(s.Sent-s.Answers["409 OUT_OF_STOCK"]), "unanswered")
		})
	}
}

// TestSenderStopsWhenAsked: once ctx ends, what was not yet sent stays NotSent.
func TestSenderStopsWhenAsked(t *testing.T) {
	addr, _ := testkit.ServeHTTP(t, soldOutAnswer)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out := newSender(addr, false, 4, time.Second, nil).offer(ctx, 1000, 1000, fixedRequest)
	for i, o := range out {
		if o.State != NotSent {
			t.Fatalf("request %d after the end: %+v", i, o)
		}
	}
}

// The sender's connections are open before its first request is due, so a sale's opening
// measures the server and not the generator dialling; it dials no more than it was given.
// Connections are counted as the kernel holds them (established to the server's port, accepted
// or still in its backlog): the server's accept loop may serve the first connection before it
// has taken the last one dialled.
func TestSenderDialsItsConnectionsBeforeTheSchedule(t *testing.T) {
	const conns = 8
	var opened, atFirst atomic.Int32
	atFirst.Store(-1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	srv := &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			if atFirst.Load() == -1 {
				atFirst.CompareAndSwap(-1, int32(establishedTo(t, port)))
			}
			soldOutAnswer(ctx)
		},
		ConnState: func(_ net.Conn, st fasthttp.ConnState) {
			if st == fasthttp.StateNew {
				opened.Add(1)
			}
		},
	}
	go srv.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { _ = srv.Shutdown() })
	addr := ln.Addr().String()
	out := newSender(addr, false, conns, 10*time.Second, newMeter()).offer(context.Background(), 100, 10_000, fixedRequest)
	for i, o := range out {
		if o.State != Answered || o.Status != 409 {
			t.Fatalf("request %d: %+v", i, o)
		}
	}
	if atFirst.Load() != conns || opened.Load() != conns {
		t.Fatalf("%d connections open at the first request, %d in all; want %d at the first and in all", atFirst.Load(), opened.Load(), conns)
	}
}

// establishedTo counts the server ends of established IPv4 TCP connections to port on this
// machine (/proc/net/tcp: local port, state 01).
func establishedTo(t *testing.T, port int) int {
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatalf("read /proc/net/tcp: %v", err)
	}
	want := fmt.Sprintf(":%04X", port)
	n := 0
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 3 && strings.HasSuffix(f[1], want) && f[3] == "01" {
			n++
		}
	}
	return n
}
