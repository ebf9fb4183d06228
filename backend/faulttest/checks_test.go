package faulttest

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/wire"
)

// row is a redemption as the database holds it.
type row struct {
	customer, status string
	discount         int64
}

func (r row) active() bool {
	return r.status == wire.StatusReserved || r.status == wire.StatusConfirmed
}

func rows(t *testing.T, pool *pgxpool.Pool, code string) map[string]row {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := pool.Query(ctx, `SELECT order_id, customer_id, status, discount_amount FROM redemptions WHERE voucher_code = $1`, code)
	if err != nil {
		t.Fatalf("read redemptions of %s: %v", code, err)
	}
	defer res.Close()
	m := map[string]row{}
	for res.Next() {
		var id string
		var r row
		if err := res.Scan(&id, &r.customer, &r.status, &r.discount); err != nil {
			t.Fatalf("read redemptions of %s: %v", code, err)
		}
		m[id] = r
	}
	if err := res.Err(); err != nil {
		t.Fatalf("read redemptions of %s: %v", code, err)
	}
	return m
}

func active(all map[string]row) map[string]row {
	m := map[string]row{}
	for id, r := range all {
		if r.active() {
			m[id] = r
		}
	}
	return m
}

// checkAnswers checks what the clients saw against the database and returns the granted
// orders: every 201 is backed by an active row of its customer with the discount answered
// (D4); an order whose clients were all refused holds no use; a client that sent its request
// after another client of the same order had its 201 got 201 as well; nothing but 201, 409
// and 503 (or no answer) was answered.
func checkAnswers(t *testing.T, pool *pgxpool.Pool, code string, outcomes []outcome) []string {
	t.Helper()
	db := rows(t, pool, code)
	byOrder := map[string][]outcome{}
	for _, o := range outcomes {
		byOrder[o.order] = append(byOrder[o.order], o)
		switch o.status {
		case 0, 201, 409, 503:
		default:
			t.Errorf("order %s: answered %d %s", o.order, o.status, o.code)
		}
	}
	var granted []string
	for order, list := range byOrder {
		var first time.Time
		refused := false
		for _, o := range list {
			switch o.status {
			case 201:
				if first.IsZero() || o.answeredAt.Before(first) {
					first = o.answeredAt
				}
			case 409:
				refused = true
			}
		}
		r, ok := db[order]
		if first.IsZero() {
			if refused && ok && r.active() {
				t.Errorf("order %s: every client was refused, yet it holds a use (%s)", order, r.status)
			}
			continue
		}
		granted = append(granted, order)
		if !ok || !r.active() || r.customer != list[0].customer || r.discount != discount {
			t.Errorf("D4 order %s: answered 201 (discount %d) but the row is %+v (found %v)", order, discount, r, ok)
		}
		for _, o := range list {
			if o.status == 201 && o.discount != discount {
				t.Errorf("order %s: 201 with discount %d; want %d", order, o.discount, discount)
			}
			if o.definitive() && o.status != 201 && o.sentAt.After(first) {
				t.Errorf("order %s: granted at %s, then a retry sent at %s answered %d %s",
					order, first.Format(time.StampMicro), o.sentAt.Format(time.StampMicro), o.status, o.code)
			}
		}
	}
	sort.Strings(granted)
	return granted
}

// attemptOf returns the attempt field of a holder.
func attemptOf(holder string) string {
	_, rest, _ := strings.Cut(holder, ":")
	a, _, _ := strings.Cut(rest, ":")
	return a
}

// hanging returns the orders Redis holds with no active row.
func hanging(g backendtest.Gate, db map[string]row) []string {
	var ids []string
	for id := range g.Orders {
		if r, ok := db[id]; !ok || !r.active() {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// checkRedisEqualsDB fails the test unless Redis holds exactly the voucher's active orders and
// total_limit minus them as its uses left.
func checkRedisEqualsDB(t *testing.T, b *backendtest.Backend, code string) {
	t.Helper()
	g := backendtest.ReadGate(t, b.App.Redis, b.Config.RedisPrefix, code)
	act := active(rows(t, b.App.Pool, code))
	if !g.Loaded {
		t.Errorf("redis equals db %s: the voucher is not loaded", code)
		return
	}
	for id := range act {
		if _, ok := g.Orders[id]; !ok {
			t.Errorf("redis equals db %s: active order %s is not in redis", code, id)
		}
	}
	if h := hanging(g, act); len(h) > 0 {
		t.Errorf("redis equals db %s: redis holds %d orders without an active row: %s", code, len(h), brief(h))
	}
	if total := totalLimit(t, b.App.Pool, code); g.Remaining != int64(total-len(act)) {
		t.Errorf("redis equals db %s: %d uses left in redis; total_limit %d minus %d active is %d",
			code, g.Remaining, total, len(act), total-len(act))
	}
}

func totalLimit(t *testing.T, pool *pgxpool.Pool, code string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT total_limit FROM vouchers WHERE code = $1`, code).Scan(&n); err != nil {
		t.Fatalf("read total_limit of %s: %v", code, err)
	}
	return n
}

// checkNoOverAllocation fails the test if the database holds more uses than total_limit.
func checkNoOverAllocation(t *testing.T, pool *pgxpool.Pool, code string) {
	t.Helper()
	if n, total := len(active(rows(t, pool, code))), totalLimit(t, pool, code); n > total {
		t.Errorf("%s: %d active redemptions; total_limit %d", code, n, total)
	}
}

// sameSet reports whether a and b hold the same strings.
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := make(map[string]bool, len(a))
	for _, s := range a {
		seen[s] = true
	}
	for _, s := range b {
		if !seen[s] {
			return false
		}
	}
	return true
}

// waitQuiet returns once neither the voucher's rows nor its Redis state have changed for half a
// second (requests the clients abandoned have finished), and fails the test after 30s.
func waitQuiet(t *testing.T, pool *pgxpool.Pool, rdb redis.UniversalClient, prefix, code string) {
	t.Helper()
	snapshot := func() string {
		g := backendtest.ReadGate(t, rdb, prefix, code)
		all := rows(t, pool, code)
		return fmt.Sprintf("%d/%d/%d/%d", len(all), len(active(all)), g.Remaining, len(g.Orders))
	}
	last, since := snapshot(), time.Now()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		if now := snapshot(); now != last {
			last, since = now, time.Now()
		} else if time.Since(since) > 500*time.Millisecond {
			return
		}
	}
	t.Fatalf("%s still changing 30s after the clients finished", code)
}

// brief lists ids for a message, the first 20 of them.
func brief(ids []string) string {
	if len(ids) > 20 {
		return fmt.Sprintf("%v and %d more", ids[:20], len(ids)-20)
	}
	return fmt.Sprint(ids)
}
