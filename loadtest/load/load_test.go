package load

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

func TestRunCountsWhatTheServerAnswers(t *testing.T) {
	var seen atomic.Int64
	var badBody atomic.Bool
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		n := seen.Add(1)
		if !strings.Contains(string(ctx.PostBody()), `"orderId":"t-`) || string(ctx.Path()) != "/vouchers/CODE/reservations" {
			badBody.Store(true)
		}
		if n%2 == 0 {
			ctx.SetStatusCode(409)
		} else {
			ctx.SetStatusCode(201)
		}
		ctx.SetBodyString(`{"x":1}`)
	}}
	go s.Serve(ln) //nolint:errcheck
	defer s.Shutdown()

	r, err := Run(context.Background(), ln.Addr().String(), Settings{Conns: 4, Duration: 300 * time.Millisecond, Warmup: 50 * time.Millisecond, Code: "CODE", Prefix: "t-"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests == 0 || r.Statuses[201]+r.Statuses[409] != r.Requests || r.Requests > seen.Load() {
		t.Fatalf("result %+v with %d seen by the server", r, seen.Load())
	}
	if badBody.Load() {
		t.Fatal("the server got a malformed reservation")
	}
	if p50, p99 := r.Latency.Quantile(0.5), r.Latency.Quantile(0.99); p50 <= 0 || p99 < p50 || r.Latency.Max() < p99 {
		t.Fatalf("p50 %v, p99 %v, max %v", p50, p99, r.Latency.Max())
	}
}

func TestRunOnlyLoadsThisMachine(t *testing.T) {
	for _, addr := range []string{"10.0.0.1:80", "example.com:80", "0.0.0.0:80", "nohost"} {
		if _, err := Run(context.Background(), addr, Settings{Conns: 1, Duration: time.Millisecond}); !errors.Is(err, ErrNotLocal) {
			t.Errorf("Run(%s) err = %v; want ErrNotLocal", addr, err)
		}
	}
}

func TestHistogramQuantiles(t *testing.T) {
	var h Histogram
	for i := 1; i <= 1000; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	for _, tt := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Microsecond}, {0.99, 990 * time.Microsecond}, {1, 1000 * time.Microsecond}} {
		got := h.Quantile(tt.q)
		if got < tt.want || float64(got) > float64(tt.want)*1.04 {
			t.Errorf("Quantile(%v) = %v; want %v within 4%% above", tt.q, got, tt.want)
		}
	}
	var o Histogram
	o.Record(time.Second)
	h.Merge(&o)
	if h.Count() != 1001 || h.Max() != time.Second {
		t.Fatalf("after Merge: count %d, max %v", h.Count(), h.Max())
	}
	for _, v := range []uint64{0, 1, 31, 32, 33, 1000, 1 << 40, 1<<63 - 1} {
		if i := bucketOf(v); uint64(upper(i)) < v || (i > 0 && uint64(upper(i-1)) >= v) {
			t.Errorf("value %d in bucket %d with bounds (%d, %d]", v, i, upper(i-1), upper(i))
		}
	}
}
