package compare

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"vouchergate/loadtest/load"
)

// BenchmarkEdgeVsBare loads the edge's sold-out answer and a bare fasthttp server answering
// the same 409, alternately with the same generator and settings, and reports both rates and
// their ratio (goal: edge/bare >= 0.8 with the edge's p99 under 5 ms). `make bench-edge` runs
// the longer version through `go run ./loadtest compare`.
func BenchmarkEdgeVsBare(b *testing.B) {
	s := load.Settings{Conns: 8, Duration: time.Second, Warmup: 250 * time.Millisecond}
	var r Report
	for b.Loop() {
		var err error
		if r, err = Run(context.Background(), 1, s); err != nil {
			b.Fatal(err)
		}
	}
	bare, edge := r.BareSummary(), r.EdgeSummary()
	b.ReportMetric(bare.RPS, "bare-req/s")
	b.ReportMetric(edge.RPS, "edge-req/s")
	b.ReportMetric(r.Ratio(), "edge/bare")
	b.ReportMetric(float64(edge.P99)/float64(time.Millisecond), "edge-p99-ms")
	b.ReportMetric(float64(bare.P99)/float64(time.Millisecond), "bare-p99-ms")
	if testing.Verbose() {
		r.Print(os.Stdout)
	}
}

func TestRunAnswersEveryRequest(t *testing.T) {
	r, err := Run(context.Background(), 1, load.Settings{Conns: 2, Duration: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Bare) != 1 || len(r.Edge) != 1 || r.Bare[0].Requests == 0 || r.Edge[0].Requests == 0 {
		t.Fatalf("report %+v", r)
	}
	for _, res := range []load.Result{r.Bare[0], r.Edge[0]} {
		if res.Statuses[409] == 0 || res.Latency.Count() != res.Requests {
			t.Fatalf("result %+v", res)
		}
	}
}

func TestRunPassThroughAnswersEveryRequest(t *testing.T) {
	r, err := RunPassThrough(context.Background(), 1, load.Settings{Conns: 2, Duration: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Bare) != 1 || len(r.Edge) != 1 || r.Bare[0].Requests == 0 || r.Edge[0].Requests == 0 {
		t.Fatalf("report %+v", r)
	}
	var out strings.Builder
	r.Print(&out)
	if !strings.Contains(out.String(), "ratio through/direct") {
		t.Fatalf("report printed as\n%s", out.String())
	}
}

// Serve starts the pair a comparison loads, for another generator: the bare server and the edge
// answer the sold-out 409, the checkout API and the edge in front of it the checkout's 200.
func TestServeStartsBothServers(t *testing.T) {
	for _, tt := range []struct {
		passThrough bool
		status      int
	}{{false, 409}, {true, 200}} {
		ref, edge, stop, err := Serve(context.Background(), tt.passThrough)
		if err != nil {
			t.Fatal(err)
		}
		s := load.Settings{Conns: 1, Duration: 100 * time.Millisecond, Code: Code, Prefix: "serve-"}
		if tt.passThrough {
			s.Path = CheckoutPath
		}
		for _, addr := range []string{ref, edge} {
			res, err := load.Run(context.Background(), addr, s)
			if err != nil || res.Requests == 0 || res.Statuses[tt.status] == 0 {
				t.Errorf("passThrough %v, %s: %+v, %v; want %d answers", tt.passThrough, addr, res.Statuses, err, tt.status)
			}
		}
		stop()
	}
}
