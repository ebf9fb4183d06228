// Package sale rehearses a flash sale against a running edge or backend: an open-loop
// generator offers reservations at a fixed rate, in traffic like a real sale's (new
// customers, retries of an earlier order, customers trying again), records every answer,
// then confirms or releases some winners, re-sends every granted order once, reads the
// voucher back through the admin API and gives a verdict on what a flash sale must
// guarantee, with a summary and an HTML report.
//
// The files follow a run: settings.go (what to run), traffic.go (who asks for what),
// sender.go (the open-loop schedule), history.go (what was asked and answered), run.go (the
// phases), verdict.go (the checks), summary.go and report.go (what is shown).
package sale

import (
	"errors"
	"fmt"
	"regexp"
	"time"
)

// Settings say which voucher to sell and how hard. The zero values of the shares mean none.
type Settings struct {
	Target string // where reservations go: http://host:port of an edge or a backend
	Admin  string // a backend's admin API: http://host:port; empty: Target
	Token  string // the admin token

	Code        string
	Create      bool  // create Code first as a flash voucher opening now
	Uses        int   // with Create: its total limit
	PerCustomer int   // with Create: its per-customer limit
	Discount    int64 // with Create: its discount
	OrderAmount int64 // every order's amount

	Rate        float64       // requests offered per second
	Duration    time.Duration // how long to offer them (or Requests)
	Requests    int           // how many to offer (wins over Duration)
	Connections int           // bound on connections to Target

	Traffic
	Tolerate503 bool          // count 503 answers as allowed, not as errors
	Timeout     time.Duration // bound on one request, from its send
	// Seed draws the traffic: the customers, orders and retries, what winners do after, and the
	// orderIds (with the code). The same seed and settings send the same requests at the same
	// times; 0: one from the clock, recorded in the summary.
	Seed   uint64
	MaxP99 time.Duration // the verdict's latency goal: the reservations' p99 at most this; 0: none
}

// Traffic is the mix of requests.
type Traffic struct {
	Customers        int     // customers are drawn from 1..Customers
	RetryShare       float64 // share of requests that resend an earlier order of the same customer
	SecondOrderShare float64 // share of new orders placed by a customer who ordered before
	ConfirmShare     float64 // share of winners that confirm after the sale
	ReleaseShare     float64 // share of winners that release after the sale
}

// MaxRequests bounds one run: its history is kept in memory (about 100 bytes a request).
const MaxRequests = 5_000_000

// ErrBadSettings is wrapped by Validate's errors: the flags need changing.
var ErrBadSettings = errors.New("bad settings")

var codePattern = regexp.MustCompile(`^[A-Z0-9_-]{1,32}$`)

// Count is how many reservations the run offers.
func (s Settings) Count() int {
	if s.Requests > 0 {
		return s.Requests
	}
	return int(s.Rate * s.Duration.Seconds())
}

// Validate names the first setting that cannot work and the form it expects.
func (s Settings) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrBadSettings}, a...)...)
	}
	share := func(name string, v float64) error {
		if v < 0 || v > 1 {
			return bad("%s is %v; expected a share from 0 to 1", name, v)
		}
		return nil
	}
	switch {
	case s.Target == "":
		return bad("--target is empty; expected http://host:port of an edge or a backend")
	case !codePattern.MatchString(s.Code):
		return bad("--code %q; expected 1-32 of A-Z, 0-9, _ and -", s.Code)
	case s.Create && (s.Uses < 1 || s.PerCustomer < 1 || s.Discount < 0):
		return bad("--create needs --uses ≥ 1, --per-customer ≥ 1 and --discount ≥ 0")
	case s.Rate <= 0:
		return bad("--rate is %v; expected requests per second > 0", s.Rate)
	case s.Requests < 0 || (s.Requests == 0 && s.Duration <= 0):
		return bad("give --requests N > 0 or --duration D > 0")
	case s.Count() < 1 || s.Count() > MaxRequests:
		return bad("the run would offer %d requests; expected 1 to %d", s.Count(), MaxRequests)
	case s.Connections < 1:
		return bad("--connections is %d; expected ≥ 1", s.Connections)
	case s.Customers < 1:
		return bad("--customers is %d; expected ≥ 1", s.Customers)
	case s.Timeout <= 0:
		return bad("--timeout is %v; expected > 0", s.Timeout)
	case s.OrderAmount < 0:
		return bad("--order-amount is %d; expected ≥ 0", s.OrderAmount)
	case s.MaxP99 < 0:
		return bad("--max-p99 is %v; expected a duration ≥ 0 (0: no latency goal)", s.MaxP99)
	}
	for _, e := range []error{share("--retry-share", s.RetryShare), share("--second-order-share", s.SecondOrderShare),
		share("--confirm-share", s.ConfirmShare), share("--release-share", s.ReleaseShare)} {
		if e != nil {
			return e
		}
	}
	if s.ConfirmShare+s.ReleaseShare > 1 {
		return bad("--confirm-share plus --release-share is %v; expected at most 1", s.ConfirmShare+s.ReleaseShare)
	}
	return nil
}
