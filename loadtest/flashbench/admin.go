package flashbench

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"

	"vouchergate/loadtest/admin"
	"vouchergate/shared/wire"
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

// DatabaseConns is how many connections PostgreSQL holds open to the backend's database: its
// pool's size at that moment (the benchmark's own reads are made from another database).
func (b *Backend) DatabaseConns(ctx context.Context) (int, error) {
	conn, err := pgx.Connect(ctx, b.servers.PostgresURL)
	if err != nil {
		return 0, fmt.Errorf("count the backend's database connections: %w", err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = $1", b.db).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the backend's database connections: %w", err)
	}
	return n, nil
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
type VoucherState = wire.VoucherView

// Admin is a client of the backend's admin API.
func (b *Backend) Admin() *admin.Client {
	return &admin.Client{URL: "http://" + b.Addr, Token: b.Token, HTTP: b.http}
}

// CreateVoucher creates v through POST /admin/vouchers.
func (b *Backend) CreateVoucher(ctx context.Context, v Voucher) error {
	now := time.Now()
	return b.Admin().Create(ctx, admin.Spec{Code: v.Code, Discount: 100, TotalLimit: v.TotalLimit,
		PerUserLimit: v.PerUserLimit, StartsAt: now.Add(-time.Minute), EndsAt: now.Add(24 * time.Hour), FlashSale: v.FlashSale})
}

// Voucher reads code's counts through GET /admin/vouchers/{code}.
func (b *Backend) Voucher(ctx context.Context, code string) (VoucherState, error) {
	return b.Admin().Voucher(ctx, code)
}
