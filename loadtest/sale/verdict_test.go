package sale

import (
	"strings"
	"testing"
)

func failed(v Verdict) []string {
	var names []string
	for _, c := range v.Checks {
		if !c.Pass {
			names = append(names, c.Name)
		}
	}
	return names
}

func TestVerdictPassesAGoodSale(t *testing.T) {
	v := Judge(recordedSale())
	if !v.Pass {
		t.Fatalf("a good sale failed:\n%s", v)
	}
	if len(v.Checks) != 6 {
		t.Errorf("%d checks, want 6:\n%s", len(v.Checks), v)
	}
}

// TestVerdictFailsABadSale breaks the good sale's history in one way at a time and sees the
// check that guards against it fail, with the verdict.
func TestVerdictFailsABadSale(t *testing.T) {
	for _, tc := range []struct {
		name  string
		check string
		spoil func(h *History)
	}{
		{"over-allocation: an 11th order granted", "supply", func(h *History) {
			h.Reservations[10] = Outcome{State: Answered, Status: 201, Discount: 100, Done: h.Reservations[10].Done}
			h.Resends = append(h.Resends, Step{Order: 10, Outcome: Outcome{State: Answered, Status: 201, Discount: 100}})
			h.After.UsedCount, h.After.Counts["RESERVED"] = 10, 9
		}},
		{"under-allocation while customers were told OUT_OF_STOCK", "supply", func(h *History) {
			h.Reservations[9] = Outcome{State: Answered, Status: 409, Error: "OUT_OF_STOCK"}
			h.Resends = h.Resends[:9]
			h.After.UsedCount, h.After.Counts["RESERVED"] = 8, 7
		}},
		{"a retry of a granted order told OUT_OF_STOCK", "retries", func(h *History) {
			h.Reservations[42] = Outcome{State: Answered, Status: 409, Error: "OUT_OF_STOCK"}
		}},
		{"a retry of a granted order given another discount", "retries", func(h *History) {
			h.Reservations[43].Discount = 50
		}},
		{"a granted order lost after the sale", "regrants", func(h *History) {
			h.Resends[2].Outcome = Outcome{State: Answered, Status: 409, Error: "OUT_OF_STOCK"}
		}},
		{"a granted order never re-sent", "regrants", func(h *History) {
			h.Resends = h.Resends[1:]
		}},
		{"a released order granted again", "regrants", func(h *History) {
			h.Resends[1].Outcome = Outcome{State: Answered, Status: 201, Discount: 100}
		}},
		{"a customer over the per-customer limit", "per-customer", func(h *History) {
			h.Plan[5].Customer = h.Plan[3].Customer
		}},
		{"an unexpected status", "answers", func(h *History) {
			h.Reservations[30] = Outcome{State: Answered, Status: 500, Error: "INTERNAL"}
		}},
		{"a request with no answer", "answers", func(h *History) {
			h.Reservations[31] = Outcome{State: Failed, Error: "timeout"}
		}},
		{"a confirm refused", "answers", func(h *History) {
			h.FollowUps[0].Outcome = Outcome{State: Answered, Status: 404, Error: "RESERVATION_NOT_FOUND"}
			h.After.Counts["CONFIRMED"], h.After.Counts["RESERVED"] = 0, 9
		}},
		{"usedCount off by one", "accounting", func(h *History) {
			h.After.UsedCount = 10
		}},
		{"a confirm answered but not counted", "accounting", func(h *History) {
			h.After.Counts["CONFIRMED"] = 0
		}},
		{"a 503 when not tolerated", "answers", func(h *History) {
			h.Reservations[33] = Outcome{State: Answered, Status: 503, Error: "UNAVAILABLE"}
		}},
		{"a granted order's re-send answered 503 when not tolerated", "answers", func(h *History) {
			h.Resends[3].Outcome = Outcome{State: Answered, Status: 503, Error: "UNAVAILABLE"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := recordedSale()
			tc.spoil(h)
			v := Judge(h)
			if v.Pass || !strings.Contains(strings.Join(failed(v), ","), tc.check) {
				t.Errorf("verdict, want %s to fail:\n%s", tc.check, v)
			}
		})
	}
}

// TestVerdictLeavesA503ToTheAnswersCheck: a retry granted after its original was answered 503
// is what a client retrying a 503 should get; only the answers check (the 503 itself) fails.
func TestVerdictLeavesA503ToTheAnswersCheck(t *testing.T) {
	h := recordedSale()
	h.Reservations[2] = Outcome{State: Answered, Status: 503, Error: "UNAVAILABLE"} // request 42 retries it: 201
	if got := failed(Judge(h)); len(got) != 1 || got[0] != "answers" {
		t.Errorf("failed checks %v, want only answers", got)
	}
}

func TestVerdictToleratesA503WhenAsked(t *testing.T) {
	h := recordedSale()
	h.Tolerate503 = true
	h.Reservations[33] = Outcome{State: Answered, Status: 503, Error: "UNAVAILABLE"}
	h.Reservations[45] = Outcome{State: Answered, Status: 503, Error: "UNAVAILABLE"} // a retry of request 20
	if v := Judge(h); !v.Pass {
		t.Errorf("a sale with tolerated 503s failed:\n%s", v)
	}
}
