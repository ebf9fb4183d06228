package history_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"vouchergate/backend/backendtest/history"
)

// sale records a flash sale on a correct voucher of total uses (one lock, one use per
// customer): workers clients at once, requests of them repeating an earlier order, and a share
// of answers lost (info) whether or not the reservation was made, each asked again.
func sale(r *history.Recorder, total, requests, workers int, lost float64, seed uint64) {
	r.Voucher("V", history.Voucher{TotalLimit: total, PerUserLimit: 1, Discount: 100})
	var mu sync.Mutex
	held := map[string]string{} // order -> customer
	var wg sync.WaitGroup
	next := make(chan int)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for i := range next {
				n := i
				if i > 10 && rng.IntN(3) == 0 {
					n = i - 1 - rng.IntN(10) // a recent order again
				}
				customer, order := fmt.Sprint("c", n), fmt.Sprint("o", n)
				for { // a lost answer is asked again, as the shop's client does
					c := r.Begin(history.Op{Kind: history.Reserve, Voucher: "V", Customer: customer, Order: order})
					time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
					mu.Lock()
					_, mine := held[order]
					granted := mine || len(held) < total
					if granted {
						held[order] = customer
					}
					mu.Unlock()
					time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
					switch {
					case rng.Float64() < lost:
						c.Info("no answer")
						continue
					case granted:
						c.Op.Status, c.Op.Discount = 201, 100
						c.Ok()
					default:
						c.Fail("OUT_OF_STOCK")
					}
					break
				}
			}
		}()
	}
	for i := range requests {
		next <- i
	}
	close(next)
	wg.Wait()
}

// A correct sale's history of 1,500 requests, 48 at a time, a tenth of their answers lost, is
// found linearizable; the time per check is the cost a fault test pays.
func BenchmarkCheckSale(b *testing.B) {
	r := history.NewRecorder()
	sale(r, 150, 1500, 48, 0.1, 1)
	ops, vouchers := r.Ops(), r.Vouchers()
	b.ResetTimer()
	for range b.N {
		if res := history.Check(ops, vouchers); !res.Linearizable() || len(res.Undecided) > 0 {
			b.Fatalf("a correct sale rejected:\n%s", res.Report(""))
		}
	}
}

// The same sale, with one grant too many slipped in, is rejected.
func TestACorrectSaleIsAcceptedAndAnOverSoldOneRejected(t *testing.T) {
	r := history.NewRecorder()
	sale(r, 150, 1500, 48, 0.1, 2)
	start := time.Now()
	res := r.Check()
	t.Logf("%d operations checked in %s", res.Ops, time.Since(start).Round(time.Millisecond))
	if !res.Linearizable() {
		t.Fatalf("a correct sale rejected:\n%s", res.Report(""))
	}
	c := r.Begin(history.Op{Kind: history.Reserve, Voucher: "V", Customer: "extra", Order: "o-extra"})
	c.Op.Status, c.Op.Discount = 201, 100
	c.Ok()
	start = time.Now()
	res = r.Check()
	t.Logf("with one grant too many: checked in %s", time.Since(start).Round(time.Millisecond))
	if res.Linearizable() {
		t.Fatalf("an over-sold sale accepted")
	}
	t.Logf("%s", res.Report(""))
	var html strings.Builder
	if err := res.Failures[0].Visualize(&html); err != nil || !strings.Contains(html.String(), "o-extra") {
		t.Errorf("the view of the over-sold window: %v (%d bytes)", err, html.Len())
	}
}
