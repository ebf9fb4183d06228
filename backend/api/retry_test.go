package api_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/wire"
)

// attempt is one request of the storm: which order, for whom.
type attempt struct {
	customer, order string
	retry           bool
}

// storm builds n requests: a third retry an earlier orderId, and some customers come back with
// a new orderId.
func storm(n int, rng *rand.Rand) []attempt {
	var firsts, all []attempt
	for len(all) < n {
		switch {
		case len(firsts) > 0 && rng.IntN(3) == 0:
			a := firsts[rng.IntN(len(firsts))]
			a.retry = true
			all = append(all, a)
		case len(firsts) > 0 && rng.IntN(4) == 0:
			// a returning customer with a new order
			a := attempt{customer: firsts[rng.IntN(len(firsts))].customer, order: fmt.Sprintf("o%d", len(firsts))}
			firsts = append(firsts, a)
			all = append(all, a)
		default:
			a := attempt{customer: fmt.Sprintf("c%d", len(firsts)), order: fmt.Sprintf("o%d", len(firsts))}
			firsts = append(firsts, a)
			all = append(all, a)
		}
	}
	return all
}

// 2,000 concurrent requests for 100 uses, a third of them retries, some customers twice:
// exactly 100 uses, every attempt of an order answered alike, nobody above per_user_limit.
func TestRetriesAndReturningCustomers(t *testing.T) {
	for _, perUser := range []int{1, 3} {
		t.Run(fmt.Sprintf("perUserLimit=%d", perUser), func(t *testing.T) {
			forBothPaths(t, func(t *testing.T, flash bool) {
				b := backendtest.Start(t, backendtest.Config(t))
				v := backendtest.Voucher{Code: "HUNDRED", Discount: 250, TotalLimit: 100, PerUserLimit: perUser, FlashSale: flash}
				b.CreateVoucher(t, v)
				recordSale(t, v, b)
				attempts := storm(2000, rand.New(rand.NewPCG(uint64(perUser), 7)))

				answers := make([]answer, len(attempts))
				var wg sync.WaitGroup
				start := make(chan struct{})
				for i, a := range attempts {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						answers[i] = reserveAsClient(t, b, "HUNDRED", a.customer, a.order, 1000)
					}()
				}
				close(start)
				wg.Wait()

				// Every order's attempts agree, once the in-flight 503s are asked again.
				byOrder := map[string]answer{}
				for i, a := range attempts {
					got := answers[i]
					if got.status >= 500 {
						t.Errorf("order %s: %d %s", a.order, got.status, got.code)
						continue
					}
					if got.status == 409 {
						// refused stays refused; which refusal may change as stock and the
						// customer's other orders move (ALREADY_USED early, OUT_OF_STOCK later)
						if got.code != wire.CodeOutOfStock && got.code != wire.CodeAlreadyUsed {
							t.Errorf("order %s: refused with %s", a.order, got.code)
						}
						got.code = "refused"
					}
					if first, ok := byOrder[a.order]; ok && first != got {
						t.Errorf("order %s answered %+v and %+v", a.order, first, got)
					}
					byOrder[a.order] = got
				}
				var granted []string
				perCustomer := map[string]int{}
				customerOf := map[string]string{}
				for _, a := range attempts {
					customerOf[a.order] = a.customer
				}
				for order, a := range byOrder {
					switch {
					case a.status == 201 && a.discount == 250:
						granted = append(granted, order)
						perCustomer[customerOf[order]]++
					case a.status == 409:
					default:
						t.Errorf("order %s: unexpected %+v", order, a)
					}
				}
				if len(granted) != 100 {
					t.Errorf("%d orders granted; want exactly 100", len(granted))
				}
				for c, n := range perCustomer {
					if n > perUser {
						t.Errorf("customer %s holds %d uses; per_user_limit %d", c, n, perUser)
					}
				}
				// a retry after the storm still gets the first answer
				for order, a := range byOrder {
					if got := reserveAsClient(t, b, "HUNDRED", customerOf[order], order, 1000); got.status != a.status || got.discount != a.discount {
						t.Errorf("order %s: retried after the sale: %+v, first %+v", order, got, a)
					}
				}
				b.CheckInvariants(t, "HUNDRED", granted)
			})
		})
	}
}
