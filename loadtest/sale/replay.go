package sale

import (
	"strconv"
	"strings"
)

// Parameters are every setting of a run, as its summary records them: with them `loadtest
// sale` sends the same traffic again (Replay). The admin token is never recorded.
type Parameters struct {
	Target      string  `json:"target"`
	Admin       string  `json:"admin"`
	Code        string  `json:"code"`
	Create      bool    `json:"create"`
	Uses        int     `json:"uses"`
	PerCustomer int     `json:"perCustomer"`
	Discount    int64   `json:"discount"`
	OrderAmount int64   `json:"orderAmount"`
	Rate        float64 `json:"rate"`
	Duration    string  `json:"duration"`
	Requests    int     `json:"requests"`
	Connections int     `json:"connections"`
	Customers   int     `json:"customers"`
	RetryShare  float64 `json:"retryShare"`
	// SecondOrderShare, ConfirmShare and ReleaseShare: see Traffic
	SecondOrderShare float64 `json:"secondOrderShare"`
	ConfirmShare     float64 `json:"confirmShare"`
	ReleaseShare     float64 `json:"releaseShare"`
	Tolerate503      bool    `json:"tolerate503"`
	Timeout          string  `json:"timeout"`
	Seed             uint64  `json:"seed"`
	MaxP99           string  `json:"maxP99"` // "0s": no latency goal
	OrderPrefix      string  `json:"orderPrefix"`
}

func parametersOf(h *History) Parameters {
	s := h.Settings
	return Parameters{Target: s.Target, Admin: s.Admin, Code: s.Code, Create: s.Create, Uses: s.Uses,
		PerCustomer: s.PerCustomer, Discount: s.Discount, OrderAmount: s.OrderAmount, Rate: s.Rate,
		Duration: s.Duration.String(), Requests: s.Requests, Connections: s.Connections, Customers: s.Customers,
		RetryShare: s.RetryShare, SecondOrderShare: s.SecondOrderShare, ConfirmShare: s.ConfirmShare,
		ReleaseShare: s.ReleaseShare, Tolerate503: s.Tolerate503, Timeout: s.Timeout.String(), Seed: s.Seed,
		MaxP99: s.MaxP99.String(), OrderPrefix: h.OrderPrefix}
}

// Replay is the command that sends the run's traffic again: the same customers, orders and
// retries at the same times, and the same orderIds for the same code. Every traffic flag is
// spelt out, so a change of a default does not change the replay. With -create the code must be
// new on the stack: give another -code for the same traffic under other orderIds.
func (p Parameters) Replay() string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	args := []string{"go run ./loadtest sale", "-target " + p.Target}
	if p.Admin != "" && p.Admin != p.Target {
		args = append(args, "-admin "+p.Admin)
	}
	args = append(args, "-code "+p.Code)
	if p.Create {
		args = append(args, "-create", "-uses "+strconv.Itoa(p.Uses), "-per-customer "+strconv.Itoa(p.PerCustomer),
			"-discount "+strconv.FormatInt(p.Discount, 10))
	}
	args = append(args, "-order-amount "+strconv.FormatInt(p.OrderAmount, 10), "-rate "+f(p.Rate))
	if p.Requests > 0 {
		args = append(args, "-requests "+strconv.Itoa(p.Requests))
	} else {
		args = append(args, "-duration "+p.Duration)
	}
	args = append(args, "-connections "+strconv.Itoa(p.Connections), "-customers "+strconv.Itoa(p.Customers),
		"-retry-share "+f(p.RetryShare), "-second-order-share "+f(p.SecondOrderShare),
		"-confirm-share "+f(p.ConfirmShare), "-release-share "+f(p.ReleaseShare), "-timeout "+p.Timeout)
	if p.Tolerate503 {
		args = append(args, "-tolerate-503")
	}
	if p.MaxP99 != "" && p.MaxP99 != "0s" {
		args = append(args, "-max-p99 "+p.MaxP99)
	}
	args = append(args, "-seed "+strconv.FormatUint(p.Seed, 10))
	return strings.Join(args, " ")
}
