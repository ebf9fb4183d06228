package flashbench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
)

// createDatabase creates database name on the server of adminURL and returns its URL.
func createDatabase(ctx context.Context, adminURL, name string) (string, error) {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", fmt.Errorf("connect to PostgreSQL at %s (is it running? `make services`): %w", adminURL, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	u, err := url.Parse(adminURL)
	if err != nil {
		return "", fmt.Errorf("PostgreSQL URL %s: %w", adminURL, err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

// dropDatabase drops database name, closing its connections.
func dropDatabase(ctx context.Context, adminURL, name string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

// Voucher is a voucher the benchmark creates: open from a minute ago for a day, 100 off
// orders of any amount.
type Voucher struct {
	Code         string
	TotalLimit   int
	PerUserLimit int
	FlashSale    bool
}

// VoucherState is what the admin API says of a voucher after a run.
type VoucherState struct {
	UsedCount      int            `json:"usedCount"`
	Counts         map[string]int `json:"counts"`
	RedisRemaining *int64         `json:"redisRemaining"`
}

// CreateVoucher creates v through POST /admin/vouchers.
func (b *Backend) CreateVoucher(ctx context.Context, v Voucher) error {
	now := time.Now().UTC()
	body, _ := json.Marshal(map[string]any{
		"code": v.Code, "discountAmount": 100, "minOrderAmount": 0,
		"totalLimit": v.TotalLimit, "perUserLimit": v.PerUserLimit,
		"startsAt": now.Add(-time.Minute).Format(time.RFC3339), "endsAt": now.Add(24 * time.Hour).Format(time.RFC3339),
		"flashSale": v.FlashSale,
	})
	status, out, err := b.admin(ctx, "POST", "/admin/vouchers", body)
	if err != nil {
		return err
	}
	if status != http.StatusCreated {
		return fmt.Errorf("create voucher %s: %d %s", v.Code, status, out)
	}
	return nil
}

// Voucher reads code's counts through GET /admin/vouchers/{code}.
func (b *Backend) Voucher(ctx context.Context, code string) (VoucherState, error) {
	status, out, err := b.admin(ctx, "GET", "/admin/vouchers/"+code, nil)
	if err != nil {
		return VoucherState{}, err
	}
	if status != http.StatusOK {
		return VoucherState{}, fmt.Errorf("read voucher %s: %d %s", code, status, out)
	}
	var v VoucherState
	if err := json.Unmarshal(out, &v); err != nil {
		return VoucherState{}, fmt.Errorf("read voucher %s: %w in %s", code, err, out)
	}
	return v, nil
}

func (b *Backend) admin(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+b.Addr+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+b.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.http.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}
