package backendtest

import (
	"context"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"
)

// CheckInvariants reads PostgreSQL and (for a flash voucher) Redis and fails the test unless
// D1–D4 and R1–R2 hold. granted lists the orderIds the API answered 201 for (D4).
func (b *Backend) CheckInvariants(t testing.TB, code string, granted []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool := b.App.Pool

	var used, total, perUser, active int
	var flash bool
	err := pool.QueryRow(ctx, `SELECT v.used_count, v.total_limit, v.per_user_limit, v.flash_sale,
		(SELECT count(*) FROM redemptions r WHERE r.voucher_code = v.code AND r.status IN ('RESERVED', 'CONFIRMED'))
		FROM vouchers v WHERE v.code = $1`, code).Scan(&used, &total, &perUser, &flash, &active)
	if err != nil {
		t.Fatalf("invariants %s: read voucher: %v", code, err)
	}
	if used != active || used > total {
		t.Errorf("D1 %s: used_count %d, active redemptions %d, total_limit %d", code, used, active, total)
	}

	// A redemption keeps the per_user_limit it was written under, and a write is refused when
	// the customer already holds that many. Rows are written in id order (under the voucher's
	// row lock) and never become active again, so when a row was written the customer held at
	// least their active rows before it: with it, no more than its own limit.
	var over int
	var one string
	if err := pool.QueryRow(ctx, `SELECT count(*), coalesce(min(order_id), '') FROM (
		SELECT order_id, per_user_limit, count(*) OVER (PARTITION BY customer_id ORDER BY id) AS held
		FROM redemptions WHERE voucher_code = $1 AND status IN ('RESERVED', 'CONFIRMED')) x
		WHERE held > per_user_limit`, code).Scan(&over, &one); err != nil {
		t.Fatalf("invariants %s: count customers' active redemptions: %v", code, err)
	}
	if over != 0 {
		t.Errorf("D2 %s: %d active redemptions (such as %s) written while their customer held their per_user_limit or more (now %d)",
			code, over, one, perUser)
	}

	var rows, orders int
	if err := pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT order_id) FROM redemptions`).Scan(&rows, &orders); err != nil {
		t.Fatalf("invariants: count orders: %v", err)
	}
	if rows != orders {
		t.Errorf("D3: %d redemptions for %d orderIds", rows, orders)
	}

	if len(granted) > 0 {
		var backed int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM redemptions WHERE order_id = ANY($1)
			AND status IN ('RESERVED', 'CONFIRMED')`, granted).Scan(&backed); err != nil {
			t.Fatalf("invariants %s: count granted: %v", code, err)
		}
		if backed != len(distinct(granted)) {
			t.Errorf("D4 %s: %d orders answered 201, %d backed by an active row", code, len(distinct(granted)), backed)
		}
	}
	if flash {
		b.CheckRedis(t, code)
	}
}

// CheckRedis fails the test unless R1 and R2 hold for a loaded flash voucher.
func (b *Backend) CheckRedis(t testing.TB, code string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g := ReadGate(t, b.App.Redis, b.Config.RedisPrefix, code)
	if !g.Loaded {
		t.Fatalf("R1 %s: the voucher is not loaded in redis", code)
	}
	remaining, holders, users := int(g.Remaining), g.Orders, g.Users
	var total, perUser int
	var rev int64
	var active bool
	if err := b.App.Pool.QueryRow(ctx, `SELECT total_limit, per_user_limit, revision, active FROM vouchers WHERE code = $1`,
		code).Scan(&total, &perUser, &rev, &active); err != nil {
		t.Fatalf("R1 %s: %v", code, err)
	}
	paused := "0"
	if !active {
		paused = "1"
	}
	want := map[string]string{"rev": strconv.FormatInt(rev, 10), "total": strconv.Itoa(total), "perUser": strconv.Itoa(perUser), "paused": paused}
	if !maps.Equal(g.Definition, want) {
		t.Errorf("redis %s holds the definition %v; the database %v", code, g.Definition, want)
	}
	if remaining+len(holders) != total || remaining < 0 {
		t.Errorf("R1 %s: remaining %d + orders %d != total_limit %d", code, remaining, len(holders), total)
	}
	perCustomer := map[string]int{}
	for _, h := range holders {
		_, rest, _ := strings.Cut(h, ":")         // reservedAtMillis
		_, customer, ok := strings.Cut(rest, ":") // attempt
		if !ok {
			t.Errorf("R1 %s: malformed holder %q", code, h)
		}
		perCustomer[customer]++
	}
	if len(perCustomer) != len(users) {
		t.Errorf("R1 %s: users has %d customers, orders %d", code, len(users), len(perCustomer))
	}
	for c, n := range perCustomer {
		if users[c] != strconv.Itoa(n) {
			t.Errorf("R1 %s: customer %s holds %d orders, users says %q", code, c, n, users[c])
		}
	}

	rows, err := b.App.Pool.Query(ctx, `SELECT order_id FROM redemptions WHERE voucher_code = $1
		AND status IN ('RESERVED', 'CONFIRMED')`, code)
	if err != nil {
		t.Fatalf("R2 %s: %v", code, err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatalf("R2 %s: %v", code, err)
		}
		if _, ok := holders[id]; !ok {
			t.Errorf("R2 %s: active order %s is not in redis", code, id)
		}
	}
}

func distinct(ids []string) map[string]bool {
	m := make(map[string]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m
}
