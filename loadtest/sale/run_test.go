package sale_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"vouchergate/loadtest/flashbench"
	"vouchergate/loadtest/sale"
)

// TestRehearsalThroughARealEdge runs a small sale through an edge and a backend built from
// this tree (on the shared PostgreSQL, Redis and NATS, under the run's own database, key
// prefix and subjects) and expects the verdict to pass; then asks to create the same code
// again and expects a setup error.
func TestRehearsalThroughARealEdge(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts a backend and an edge")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b, err := flashbench.StartBackend(ctx, flashbench.DefaultServers, "")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	e, err := flashbench.StartEdge(ctx, b, "")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s := sale.Settings{
		Target: "http://" + e.Addr, Admin: "http://" + b.Addr, Token: b.Token,
		Code: fmt.Sprintf("REHEARSE-%d", time.Now().UnixNano()%1e9), Create: true, Uses: 100, PerCustomer: 2, Discount: 70,
		OrderAmount: 1000, Rate: 2000, Requests: 1500, Connections: 32, Timeout: 10 * time.Second, Seed: 11,
		// a 503 is the design's answer to a Redis call slower than VG_REDIS_TIMEOUT, which a CI
		// machine busy with every other package's tests may cause; the client would retry it
		Tolerate503: true,
		Traffic:     sale.Traffic{Customers: 500, RetryShare: 0.1, SecondOrderShare: 0.3, ConfirmShare: 0.4, ReleaseShare: 0.2},
	}
	h, err := sale.Run(ctx, s, nil)
	if err != nil {
		t.Fatalf("%v\nbackend: %s\nedge: %s", err, b.LogTail(2000), e.LogTail(2000))
	}
	v := sale.Judge(h)
	sum := sale.Summarize(h, v)
	if !v.Pass {
		t.Errorf("verdict:\n%s", v)
	}
	if sum.Granted != 100 || sum.Sent != 1500 || sum.SoldOutMs == nil || sum.Confirmed == 0 || sum.Released == 0 {
		t.Errorf("summary: %+v", sum)
	}
	if h.After.DiscountAmount != 70 || h.After.PerUserLimit != 2 || !h.After.FlashSale {
		t.Errorf("the voucher created: %+v", h.After)
	}
	s.Requests = 1
	if _, err := sale.Run(ctx, s, nil); !errors.Is(err, sale.ErrSetup) {
		t.Errorf("creating %s again: %v, want ErrSetup", s.Code, err)
	}
}
