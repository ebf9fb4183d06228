package gate_test

import (
	"context"
	"testing"
	"time"

	"vouchergate/backend/gate"
	"vouchergate/backend/voucher"
	"vouchergate/shared/keys"
)

// An active row's order held in Redis for another customer (that customer's take of the same
// orderId after Redis lost the row's) counts as missing, and putting the row back makes the
// entry the row's in the same use: remaining stays, each customer's count follows the order,
// and the other take's attempt finds nothing of its own to give back.
func TestAnOrderHeldForAnotherCustomerIsMissingAndPutBackAsTheRows(t *testing.T) {
	ctx := context.Background()
	rdb, prefix := singleRedis(t)
	g := gate.New(rdb, prefix)
	v := voucher.Voucher{Code: "OTHER", TotalLimit: 3, PerUserLimit: 1}
	if _, err := g.Load(ctx, v, nil); err != nil {
		t.Fatal(err)
	}
	other := voucher.Holder{CustomerID: "c-b", ReservedAt: time.Now(), Attempt: "b1"}
	if r, err := g.Reserve(ctx, v, "o-x", other); err != nil || r.Outcome != voucher.GateReserved {
		t.Fatalf("B's take: %+v %v", r, err)
	}
	own := voucher.Holder{CustomerID: "c-c", ReservedAt: time.Now(), Attempt: "c1"}
	if r, err := g.Reserve(ctx, v, "o-c", own); err != nil || r.Outcome != voucher.GateReserved {
		t.Fatalf("C's take: %+v %v", r, err)
	}
	rowX := voucher.Redemption{VoucherCode: v.Code, OrderID: "o-x", CustomerID: "c-a", ReservedAt: time.Now()}
	rowC := voucher.Redemption{VoucherCode: v.Code, OrderID: "o-c", CustomerID: "c-c", ReservedAt: time.Now()}
	rowL := voucher.Redemption{VoucherCode: v.Code, OrderID: "o-lost", CustomerID: "c-l", ReservedAt: time.Now()}

	missing, err := g.Missing(ctx, v.Code, []voucher.Redemption{rowX, rowC, rowL})
	if err != nil || len(missing) != 2 || missing[0].OrderID != "o-x" || missing[1].OrderID != "o-lost" {
		t.Fatalf("missing: %+v %v; want o-x (held for c-b) and o-lost", missing, err)
	}
	if ok, err := g.PutBack(ctx, rowC); err != nil || ok {
		t.Errorf("put back an order held for its customer: %v %v; want nothing done", ok, err)
	}
	if ok, err := g.PutBack(ctx, rowX); err != nil || !ok {
		t.Fatalf("put back o-x held for c-b: %v %v; want it made c-a's", ok, err)
	}
	if h, held, err := g.Holding(ctx, v.Code, "o-x"); err != nil || !held || h.CustomerID != "c-a" || h.Attempt != voucher.LoadedAttempt {
		t.Errorf("o-x held by %+v (%v %v); want c-a's loaded row", h, held, err)
	}
	if released, _, err := g.Release(ctx, v.Code, "o-x", &other); err != nil || released {
		t.Errorf("B's give-back after the put-back: %v %v; want nothing released", released, err)
	}
	if remaining, _, err := g.Remaining(ctx, v.Code); err != nil || remaining != 1 {
		t.Errorf("remaining %d (%v); want 1: o-x and o-c hold one use each", remaining, err)
	}
	users, err := rdb.HGetAll(ctx, keys.ForVoucher(prefix, v.Code).Users).Result()
	if err != nil || len(users) != 2 || users["c-a"] != "1" || users["c-c"] != "1" {
		t.Errorf("users %v (%v); want c-a 1 and c-c 1", users, err)
	}
	if missing, err := g.Missing(ctx, v.Code, []voucher.Redemption{rowX, rowC}); err != nil || len(missing) != 0 {
		t.Errorf("missing after the put-back: %+v %v; want none", missing, err)
	}
}
