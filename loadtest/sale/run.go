package sale

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"vouchergate/loadtest/admin"
	"vouchergate/loadtest/load"
)

// ErrSetup is wrapped by Run's errors when the sale could not be run at all: the target or
// the admin API cannot be reached, or the voucher cannot be created or read.
var ErrSetup = errors.New("cannot set up the sale")

// Run rehearses the sale s describes and returns its history: the voucher (created first if
// s.Create), the reservations offered open loop, the winners' confirms and releases, one
// re-send of every granted order, and the voucher read back. Progress goes to progressTo
// once a second (nil: none).
func Run(ctx context.Context, s Settings, progressTo io.Writer) (*History, error) {
	r, err := prepare(ctx, s, progressTo)
	if err != nil {
		return nil, err
	}
	h := r.h
	h.Plan = Plan(s.Traffic, s.Count(), r.seed)
	h.Started = time.Now()
	cpu := load.SelfCPU()
	h.Reservations = r.phase(ctx, "sale", len(h.Plan), reservations(h, s.OrderAmount))
	h.GeneratorCPU = load.SelfCPU() - cpu
	if err := ctx.Err(); err != nil {
		return h, fmt.Errorf("the sale was interrupted: %w", err)
	}
	grants := h.Grants()
	actions := Decide(s.Traffic, len(grants), r.seed)
	for i, g := range grants {
		if actions[i] != Keep {
			h.FollowUps = append(h.FollowUps, Step{Order: g.Order, Action: actions[i]})
		}
	}
	for i, o := range r.phase(ctx, "follow-ups", len(h.FollowUps), followUps(h)) {
		h.FollowUps[i].Outcome = o
	}
	for _, g := range grants {
		h.Resends = append(h.Resends, Step{Order: g.Order})
	}
	for i, o := range r.phase(ctx, "re-sends", len(h.Resends), resends(h, grants, s.OrderAmount)) {
		h.Resends[i].Outcome = o
	}
	if err := ctx.Err(); err != nil {
		return h, fmt.Errorf("the sale was interrupted: %w", err)
	}
	if h.After, err = r.admin.Voucher(ctx, s.Code); err != nil {
		return h, fmt.Errorf("%w: after the sale: %w", ErrSetup, err)
	}
	return h, nil
}

// rehearsal is what the phases of a run share.
type rehearsal struct {
	s          Settings
	admin      *admin.Client
	host       string // host:port of the target
	tls        bool
	progressTo io.Writer
	seed       uint64
	h          *History
}

// prepare checks s, creates the voucher if asked, reads it, and checks the target answers.
func prepare(ctx context.Context, s Settings, progressTo io.Writer) (*rehearsal, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	target, err := url.Parse(s.Target)
	if err != nil || (target.Scheme != "http" && target.Scheme != "https") || target.Host == "" {
		return nil, fmt.Errorf("%w: --target %q; expected http://host:port", ErrBadSettings, s.Target)
	}
	if s.Admin == "" {
		s.Admin = s.Target
	}
	r := &rehearsal{s: s, admin: admin.New(s.Admin, s.Token), host: target.Host, tls: target.Scheme == "https",
		progressTo: progressTo, seed: s.Seed}
	if target.Port() == "" {
		r.host += map[bool]string{true: ":443", false: ":80"}[r.tls]
	}
	if r.seed == 0 {
		r.seed = uint64(time.Now().UnixNano())
	}
	if s.Create {
		now := time.Now()
		spec := admin.Spec{Code: s.Code, Discount: s.Discount, TotalLimit: s.Uses, PerUserLimit: s.PerCustomer,
			StartsAt: now.Add(-time.Second), EndsAt: now.Add(time.Hour + 10*s.Duration), FlashSale: true}
		if err := r.admin.Create(ctx, spec); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrSetup, err)
		}
	}
	recorded := s
	recorded.Token, recorded.Seed = "", r.seed // a secret stays out of the summary; the seed in
	r.h = &History{Target: s.Target, Code: s.Code, OrderPrefix: orderPrefix(r.seed, s.Code), Rate: s.Rate,
		Tolerate503: s.Tolerate503, Settings: recorded}
	if r.h.Before, err = r.admin.Voucher(ctx, s.Code); err != nil {
		if s.Admin == s.Target {
			err = fmt.Errorf("%w (the admin API is the target's; an edge does not serve it: give --admin a backend)", err)
		}
		return nil, fmt.Errorf("%w: %w", ErrSetup, err)
	}
	if err := reachable(r.host, r.tls); err != nil {
		return nil, fmt.Errorf("%w: reach %s: %w", ErrSetup, s.Target, err)
	}
	return r, nil
}

// phase offers n requests written by write at the sale's rate, printing progress if asked.
func (r *rehearsal) phase(ctx context.Context, name string, n int, write writer) []Outcome {
	if n == 0 {
		return nil
	}
	var m *meter
	if r.progressTo != nil {
		m = newMeter()
		stop := make(chan struct{})
		defer close(stop)
		go progress(r.progressTo, name, m, stop)
	}
	return newSender(r.host, r.tls, r.s.Connections, r.s.Timeout, m).offer(ctx, n, r.s.Rate, write)
}

// reservations writes h's planned reservations: numeric customerIds, as the shops' existing clients send.
func reservations(h *History, amount int64) writer {
	path := "/vouchers/" + h.Code + "/reservations"
	return func(i int, req *fasthttp.Request, buf []byte) []byte {
		p := h.Plan[i]
		return reservation(req, path, h.OrderPrefix, p.Customer, p.Order, amount, buf)
	}
}

// resends writes one reservation of each granted order, as its customer first sent it.
func resends(h *History, grants []Grant, amount int64) writer {
	path := "/vouchers/" + h.Code + "/reservations"
	customer := make(map[int32]uint64, len(grants))
	for _, g := range grants {
		customer[g.Order] = g.Customer
	}
	return func(i int, req *fasthttp.Request, buf []byte) []byte {
		order := h.Resends[i].Order
		return reservation(req, path, h.OrderPrefix, customer[order], order, amount, buf)
	}
}

func reservation(req *fasthttp.Request, path, prefix string, customer uint64, order int32, amount int64, buf []byte) []byte {
	buf = append(buf[:0], `{"customerId":`...)
	buf = strconv.AppendUint(buf, customer, 10)
	buf = append(buf, `,"orderId":"`...)
	buf = append(buf, prefix...)
	buf = strconv.AppendInt(buf, int64(order), 10)
	buf = append(buf, `","orderAmount":`...)
	buf = strconv.AppendInt(buf, amount, 10)
	buf = append(buf, '}')
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURI(path)
	req.Header.SetContentType("application/json")
	req.SetBodyRaw(buf)
	return buf
}

// followUps writes the confirms and releases of h.FollowUps.
func followUps(h *History) writer {
	return func(i int, req *fasthttp.Request, buf []byte) []byte {
		f := h.FollowUps[i]
		buf = append(buf[:0], "/vouchers/"...)
		buf = append(buf, h.Code...)
		buf = append(buf, "/reservations/"...)
		buf = append(buf, h.OrderID(f.Order)...)
		if f.Action == Confirm {
			req.Header.SetMethod(fasthttp.MethodPost)
			buf = append(buf, "/confirm"...)
		} else {
			req.Header.SetMethod(fasthttp.MethodDelete)
		}
		req.SetRequestURIBytes(buf)
		return buf
	}
}

// orderPrefix is a run's orderId prefix, drawn from its seed and code. OrderIds are unique
// across vouchers, so two sales of other codes never share one; a replay of a run (its seed and
// code, on a stack that has not seen them) sends the very same orderIds.
func orderPrefix(seed uint64, code string) string {
	h := sha256.New()
	_ = binary.Write(h, binary.BigEndian, seed)
	h.Write([]byte(code))
	return "s" + hex.EncodeToString(h.Sum(nil)[:5]) + "-"
}

// reachable asks host for /healthz; any HTTP answer will do.
func reachable(host string, tls bool) error {
	c := &fasthttp.HostClient{Addr: host, IsTLS: tls}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("/healthz")
	req.Header.SetHost(host)
	return c.DoTimeout(req, resp, 3*time.Second)
}
