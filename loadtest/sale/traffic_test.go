package sale

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPlanDrawsTheMixAskedFor(t *testing.T) {
	tr := Traffic{Customers: 10_000_000, RetryShare: 0.1, SecondOrderShare: 0.2}
	plan := Plan(tr, 100_000, 42)
	if !slices.Equal(plan, Plan(tr, 100_000, 42)) {
		t.Fatal("the same seed drew another plan")
	}
	var retries, second int
	seen := map[uint64]bool{}
	orders := map[int32]uint64{}
	for i, p := range plan {
		if p.Retry(i) {
			retries++
			if int(p.Original) >= i || plan[p.Original].Retry(int(p.Original)) {
				t.Fatalf("request %d retries %d, which is not an earlier original", i, p.Original)
			}
			if orders[p.Order] != p.Customer {
				t.Fatalf("request %d resends order %d as customer %d; it was %d's", i, p.Order, p.Customer, orders[p.Order])
			}
			continue
		}
		if _, dup := orders[p.Order]; dup {
			t.Fatalf("request %d places order %d again", i, p.Order)
		}
		orders[p.Order] = p.Customer
		if seen[p.Customer] {
			second++
		}
		seen[p.Customer] = true
	}
	near := func(got, want float64) bool { return math.Abs(got-want) < 0.01 }
	if r := float64(retries) / float64(len(plan)); !near(r, 0.1) {
		t.Errorf("retry share %.3f, want 0.1", r)
	}
	if s := float64(second) / float64(len(plan)-retries); !near(s, 0.2) {
		t.Errorf("second-order share %.3f, want 0.2", s)
	}
}

func TestDecideSplitsTheWinners(t *testing.T) {
	d := Decide(Traffic{ConfirmShare: 0.5, ReleaseShare: 0.2}, 10_000, 7)
	var n [3]int
	for _, f := range d {
		n[f]++
	}
	if math.Abs(float64(n[Confirm])/1e4-0.5) > 0.02 || math.Abs(float64(n[Release])/1e4-0.2) > 0.02 {
		t.Errorf("keep/confirm/release %v of 10,000; want about 3,000/5,000/2,000", n)
	}
}

func TestValidateNamesTheBadSetting(t *testing.T) {
	good := Settings{Target: "http://127.0.0.1:8081", Code: "FLASH", Rate: 1000, Requests: 100, Connections: 8,
		Timeout: time.Second, Traffic: Traffic{Customers: 10}}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, spoil := range map[string]func(*Settings){
		"--code":          func(s *Settings) { s.Code = "lower" },
		"--rate":          func(s *Settings) { s.Rate = 0 },
		"--requests":      func(s *Settings) { s.Requests, s.Duration = 0, 0 },
		"--connections":   func(s *Settings) { s.Connections = 0 },
		"--retry-share":   func(s *Settings) { s.RetryShare = 1.5 },
		"--release-share": func(s *Settings) { s.ConfirmShare, s.ReleaseShare = 0.7, 0.7 },
		"--create":        func(s *Settings) { s.Create = true },
	} {
		s := good
		spoil(&s)
		err := s.Validate()
		if !errors.Is(err, ErrBadSettings) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
