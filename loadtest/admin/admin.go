// Package admin is a client of the backend's admin API for the load generators: create a
// voucher for a run and read its counts back afterwards.
package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"vouchergate/shared/wire"
)

// ErrVoucherExists is returned by Create when the code is taken (409 VOUCHER_EXISTS).
var ErrVoucherExists = errors.New("the voucher exists")

// Client calls the admin API of the backend at URL (http://host:port) with Token.
// Its methods may be called from several goroutines.
type Client struct {
	URL   string
	Token string
	HTTP  *http.Client // nil: one with a 30 s timeout
}

// New returns a client of the backend at url ("host:port" is taken as http://host:port).
func New(url, token string) *Client {
	if !strings.Contains(url, "://") {
		url = "http://" + url
	}
	return &Client{URL: strings.TrimRight(url, "/"), Token: token, HTTP: &http.Client{Timeout: 30 * time.Second}}
}

// Spec is a voucher to create: open from StartsAt to EndsAt.
type Spec struct {
	Code         string
	Discount     int64
	MinOrder     int64
	TotalLimit   int
	PerUserLimit int
	StartsAt     time.Time
	EndsAt       time.Time
	FlashSale    bool
}

// Create creates the voucher through POST /admin/vouchers.
func (c *Client) Create(ctx context.Context, s Spec) error {
	body, _ := json.Marshal(wire.VoucherSpec{
		Code: s.Code, DiscountAmount: &s.Discount, MinOrderAmount: s.MinOrder,
		TotalLimit: &s.TotalLimit, PerUserLimit: &s.PerUserLimit,
		StartsAt: s.StartsAt.UTC().Format(time.RFC3339), EndsAt: s.EndsAt.UTC().Format(time.RFC3339),
		FlashSale: s.FlashSale,
	})
	status, out, err := c.do(ctx, "POST", "/admin/vouchers", body)
	switch {
	case err != nil:
		return fmt.Errorf("create voucher %s: %w", s.Code, err)
	case status == http.StatusConflict:
		return fmt.Errorf("create voucher %s: %w (%s)", s.Code, ErrVoucherExists, bytes.TrimSpace(out))
	case status != http.StatusCreated:
		return fmt.Errorf("create voucher %s: %d %s", s.Code, status, bytes.TrimSpace(out))
	}
	return nil
}

// Voucher reads the voucher through GET /admin/vouchers/{code}.
func (c *Client) Voucher(ctx context.Context, code string) (wire.VoucherView, error) {
	status, out, err := c.do(ctx, "GET", "/admin/vouchers/"+code, nil)
	if err != nil {
		return wire.VoucherView{}, fmt.Errorf("read voucher %s: %w", code, err)
	}
	if status != http.StatusOK {
		return wire.VoucherView{}, fmt.Errorf("read voucher %s: %d %s", code, status, bytes.TrimSpace(out))
	}
	var v wire.VoucherView
	if err := json.Unmarshal(out, &v); err != nil {
		return wire.VoucherView{}, fmt.Errorf("read voucher %s: %w in %s", code, err, out)
	}
	return v, nil
}

func (c *Client) do(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.URL+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Content-Type", "application/json")
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, out, err
}
