package sale

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"vouchergate/loadtest/admin"
)

// ErrSetup is wrapped by Run's errors when the sale could not be run at all: the target or
// the admin API cannot be reached, or the voucher cannot be created or read.
var ErrSetup = errors.New("cannot set up the sale")

// Run rehearses the sale s describes and returns its history: the voucher (created first if
// s.Create), the reservations offered open loop, the winners' confirms and releases, one
// re-send of every granted order, and the voucher read back. Progress goes to progressTo
// once a second (nil: none).
func Run(ctx context.Context, s Settings, progressTo io.Writer) (*History, error) {
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
	adm := admin.New(s.Admin, s.Token)
	if s.Create {
		now := time.Now()
		spec := admin.Spec{Code: s.Code, Discount: s.Discount, TotalLimit: s.Uses, PerUserLimit: s.PerCustomer,
			StartsAt: now.Add(-time.Second), EndsAt: now.Add(time.Hour + 10*s.Duration), FlashSale: true}
		if err := adm.Create(ctx, spec); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrSetup, err)
		}
	}
	h := &History{Target: s.Target, Code: s.Code, OrderPrefix: orderPrefix(), Rate: s.Rate, Tolerate503: s.Tolerate503}
	if h.Before, err = adm.Voucher(ctx, s.Code); err != nil {
		if s.Admin == s.Target {
			err = fmt.Errorf("%w (the admin API is the target's; an edge does not serve it: give --admin a backend)", err)
		}
		return nil, fmt.Errorf("%w: %w", ErrSetup, err)
	}
	host := target.Host
	if target.Port() == "" {
		host += map[bool]string{true: ":443", false: ":80"}[target.Scheme == "https"]
	}
	if err := reachable(host, target.Scheme == "https"); err != nil {
		return nil, fmt.Errorf("%w: reach %s: %w", ErrSetup, s.Target, err)
	}
	seed := s.Seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	h.Plan = Plan(s.Traffic, s.Count(), seed)
	h.Started = time.Now()
	cpu := cpuTime()
	h.Reservations = phase(ctx, "sale", s, host, target.Scheme == "https", progressTo, len(h.Plan), reservations(h, s.OrderAmount))
	h.GeneratorCPU = cpuTime() - cpu
	if err := ctx.Err(); err != nil {
		return h, fmt.Errorf("the sale was interrupted: %w", err)
	}
	grants := h.Grants()
	actions := Decide(s.Traffic, len(grants), seed)
	for i, g := range grants {
		if actions[i] != Keep {
			h.FollowUps = append(h.FollowUps, Step{Order: g.Order, Action: actions[i]})
		}
	}
	for i, o := range phase(ctx, "follow-ups", s, host, target.Scheme == "https", progressTo, len(h.FollowUps), followUps(h)) {
		h.FollowUps[i].Outcome = o
	}
	for _, g := range grants {
		h.Resends = append(h.Resends, Step{Order: g.Order})
	}
	resendCustomer := map[int32]uint64{}
	for _, g := range grants {
		resendCustomer[g.Order] = g.Customer
	}
	for i, o := range phase(ctx, "re-sends", s, host, target.Scheme == "https", progressTo, len(h.Resends), resends(h, resendCustomer, s.OrderAmount)) {
		h.Resends[i].Outcome = o
	}
	if err := ctx.Err(); err != nil {
		return h, fmt.Errorf("the sale was interrupted: %w", err)
	}
	if h.After, err = adm.Voucher(ctx, s.Code); err != nil {
		return h, fmt.Errorf("%w: after the sale: %w", ErrSetup, err)
	}
	return h, nil
}

// phase offers n requests written by write at s.Rate, printing progress if asked.
func phase(ctx context.Context, name string, s Settings, host string, tls bool, progressTo io.Writer, n int, write writer) []Outcome {
	if n == 0 {
		return nil
	}
	var m *meter
	if progressTo != nil {
		m = newMeter()
		stop := make(chan struct{})
		defer close(stop)
		go progress(progressTo, name, m, stop)
	}
	return newSender(host, tls, s.Connections, s.Timeout, m).offer(ctx, n, s.Rate, write)
}

// reservations writes h's planned reservations: numeric customerIds, as the seed's clients send.
func reservations(h *History, amount int64) writer {
	path := "/vouchers/" + h.Code + "/reservations"
	return func(i int, req *fasthttp.Request, buf []byte) []byte {
		p := h.Plan[i]
		return reservation(req, path, h.OrderPrefix, p.Customer, p.Order, amount, buf)
	}
}

// resends writes one reservation of each granted order, as its customer first sent it.
func resends(h *History, customer map[int32]uint64, amount int64) writer {
	path := "/vouchers/" + h.Code + "/reservations"
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

// orderPrefix is a run's own orderId prefix: orderIds are unique across vouchers.
func orderPrefix() string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return "s" + hex.EncodeToString(b) + "-"
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
