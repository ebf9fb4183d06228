package sale

import (
	"fmt"
	"strings"
)

// Check is one guarantee of a flash sale, whether the run kept it, and the figures that say so.
type Check struct {
	Name    string   `json:"name"`
	Pass    bool     `json:"pass"`
	Figures string   `json:"figures"`
	Samples []string `json:"samples,omitempty"` // a few of the requests that broke it
}

// Verdict is every check of a run.
type Verdict struct {
	Pass   bool    `json:"pass"`
	Checks []Check `json:"checks"`
}

// maxSamples bounds the examples a failed check quotes.
const maxSamples = 5

// Judge checks what a flash sale must guarantee against h:
//   - supply: no more granted than the voucher had left, and exactly that many when demand
//     exceeded supply (some request was told OUT_OF_STOCK; nothing is released during the sale);
//   - accounting: the admin's usedCount is what it was plus granted minus released, and its
//     counts of confirmed and released rows grew by the confirms and releases answered 200;
//   - retries: every retry got its original's answer (status, and discount of a 201); a 503 or
//     no answer on either side decides nothing and is left to the answers check;
//   - regrants: every granted order, re-sent once after the sale, got 201 with its discount
//     again (a released one: 409);
//   - per-customer: no customer holds more than the voucher's per-customer limit;
//   - answers: none but 201 and 409 to reservations, 200 to confirms and releases (and 503 when
//     tolerated), and none lost;
//   - latency, with a goal (Settings.MaxP99): the reservations' p99, from their scheduled send,
//     at most the goal.
func Judge(h *History) Verdict {
	checks := []Check{supply(h), accounting(h), retries(h), regrants(h), perCustomer(h), answers(h)}
	if h.Settings.MaxP99 > 0 {
		checks = append(checks, latency(h))
	}
	v := Verdict{Pass: true, Checks: checks}
	for _, c := range checks {
		v.Pass = v.Pass && c.Pass
	}
	return v
}

func supply(h *History) Check {
	granted := len(h.Grants())
	left := h.Before.TotalLimit - h.Before.UsedCount
	outOfStock := 0
	for _, o := range h.Reservations {
		if o.State == Answered && o.Status == 409 && o.Error == "OUT_OF_STOCK" {
			outOfStock++
		}
	}
	c := Check{Name: "supply", Pass: granted <= left && (outOfStock == 0 || granted == left)}
	c.Figures = fmt.Sprintf("%d orders granted of %d uses left (total %d, %d used before the sale)",
		granted, left, h.Before.TotalLimit, h.Before.UsedCount)
	if outOfStock > 0 {
		c.Figures += fmt.Sprintf("; demand exceeded supply (%d OUT_OF_STOCK answers), so exactly %d must be granted", outOfStock, left)
	}
	return c
}

func accounting(h *History) Check {
	granted := len(h.Grants())
	confirmed, released := h.Settled()
	wantUsed := h.Before.UsedCount + granted - released
	gotConfirmed := h.After.Counts["CONFIRMED"] - h.Before.Counts["CONFIRMED"]
	gotReleased := h.After.Counts["RELEASED"] - h.Before.Counts["RELEASED"]
	return Check{
		Name: "accounting",
		Pass: h.After.UsedCount == wantUsed && gotConfirmed == confirmed && gotReleased == released,
		Figures: fmt.Sprintf("usedCount %d, expected %d (%d before + %d granted - %d released); confirmed rows +%d, expected +%d; released rows +%d, expected +%d",
			h.After.UsedCount, wantUsed, h.Before.UsedCount, granted, released, gotConfirmed, confirmed, gotReleased, released),
	}
}

// undecided reports whether o decided nothing: no answer, or a 503 (retryable: the order may
// be granted or refused later). The answers check counts them as errors unless tolerated.
func undecided(o Outcome) bool {
	return o.State != Answered || o.Status == 503
}

func same(a, b Outcome) bool {
	return a.Status == b.Status && (a.Status != 201 || a.Discount == b.Discount)
}

func retries(h *History) Check {
	c := Check{Name: "retries"}
	var n, compared, differ int
	for i, p := range h.Plan {
		if !p.Retry(i) {
			continue
		}
		n++
		o, first := h.Reservations[i], h.Reservations[p.Original]
		if undecided(o) || undecided(first) {
			continue
		}
		compared++
		if !same(o, first) {
			differ++
			c.sample(fmt.Sprintf("request %d (customer %d, order %s) answered %s, its original (request %d) %s",
				i, p.Customer, h.OrderID(p.Order), describe(o), p.Original, describe(first)))
		}
	}
	c.Pass = differ == 0
	c.Figures = fmt.Sprintf("%d of %d retries answered as their original; %d differ; %d not comparable (one of the two had no answer or a 503)",
		compared-differ, n, differ, n-compared)
	return c
}

func regrants(h *History) Check {
	c := Check{Name: "regrants"}
	released := map[int32]bool{}
	unsettled := map[int32]bool{} // a release whose outcome is not known
	for _, f := range h.FollowUps {
		if f.Action == Release {
			if f.State == Answered && f.Status == 200 {
				released[f.Order] = true
			} else {
				unsettled[f.Order] = true
			}
		}
	}
	discount := map[int32]int64{}
	for _, g := range h.Grants() {
		discount[g.Order] = g.Discount
	}
	var ok, wrong, skipped int
	for _, r := range h.Resends {
		if undecided(r.Outcome) || unsettled[r.Order] {
			skipped++
			continue
		}
		want := Outcome{State: Answered, Status: 201, Discount: discount[r.Order]}
		if released[r.Order] {
			want = Outcome{State: Answered, Status: 409}
		}
		if same(r.Outcome, want) {
			ok++
			continue
		}
		wrong++
		c.sample(fmt.Sprintf("order %s (released: %v) re-sent after the sale: %s, expected %s",
			h.OrderID(r.Order), released[r.Order], describe(r.Outcome), describe(want)))
	}
	grants := len(discount)
	c.Pass = wrong == 0 && len(h.Resends) == grants
	c.Figures = fmt.Sprintf("%d granted orders, %d re-sent after the sale: %d answered as granted (201, same discount; 409 if released), %d not, %d not comparable (no answer or a 503)",
		grants, len(h.Resends), ok, wrong, skipped)
	return c
}

func perCustomer(h *History) Check {
	held := map[uint64]int{}
	most, over := 0, 0
	for _, g := range h.Grants() {
		held[g.Customer]++
		if held[g.Customer] == h.Before.PerUserLimit+1 {
			over++
		}
		most = max(most, held[g.Customer])
	}
	c := Check{Name: "per-customer", Pass: over == 0,
		Figures: fmt.Sprintf("%d customers won; the most held by one is %d (limit %d); %d over the limit",
			len(held), most, h.Before.PerUserLimit, over)}
	for cust, n := range held {
		if n > h.Before.PerUserLimit {
			c.sample(fmt.Sprintf("customer %d holds %d uses", cust, n))
		}
	}
	return c
}

func answers(h *History) Check {
	c := Check{Name: "answers"}
	bad := map[string]int{}
	count := func(phase string, o Outcome, want ...int) {
		if !h.allowed(o, want...) {
			bad[phase+" "+o.Key()]++
		}
	}
	for _, o := range h.Reservations {
		count("reservation", o, 201, 409)
	}
	for _, f := range h.FollowUps {
		count(f.Action.String(), f.Outcome, 200)
	}
	for _, r := range h.Resends {
		count("re-send", r.Outcome, 201, 409)
	}
	total := 0
	for k, n := range bad {
		total += n
		c.sample(fmt.Sprintf("%s: %d", k, n))
	}
	allowed := "201/409 to reservations, 200 to confirms and releases"
	if h.Tolerate503 {
		allowed += ", 503 tolerated"
	}
	c.Pass = total == 0
	c.Figures = fmt.Sprintf("%d errors in %d requests (allowed: %s)", total, len(h.Reservations)+len(h.FollowUps)+len(h.Resends), allowed)
	return c
}

func latency(h *History) Check {
	p := percentiles(h.Reservations)
	goal := ms(h.Settings.MaxP99)
	return Check{Name: "latency", Pass: p.P99 <= goal,
		Figures: fmt.Sprintf("reservations' p99 %.2f ms from the scheduled send; goal at most %.2f ms (-max-p99)", p.P99, goal)}
}

func (c *Check) sample(s string) {
	if len(c.Samples) < maxSamples {
		c.Samples = append(c.Samples, s)
	}
}

// describe says what an answer was, for a sample.
func describe(o Outcome) string {
	if o.State == Answered && o.Status == 201 {
		return fmt.Sprintf("201 discount %d", o.Discount)
	}
	return o.Key()
}

// String is the verdict as lines of text: each check, PASS or FAIL, with its figures.
func (v Verdict) String() string {
	var b strings.Builder
	for _, c := range v.Checks {
		mark := "PASS"
		if !c.Pass {
			mark = "FAIL"
		}
		fmt.Fprintf(&b, "  %s %-12s %s\n", mark, c.Name, c.Figures)
		for _, s := range c.Samples {
			fmt.Fprintf(&b, "         e.g. %s\n", s)
		}
	}
	word := "PASS"
	if !v.Pass {
		word = "FAIL"
	}
	fmt.Fprintf(&b, "verdict: %s", word)
	return b.String()
}
