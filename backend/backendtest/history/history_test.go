package history_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"vouchergate/backend/backendtest/history"
	"vouchergate/shared/wire"
)

// ms is a time in the hand-made histories: milliseconds since the start.
func ms(n int) int64 { return int64(n) * 1e6 }

func reserve(id int, customer, order string, from, to int, outcome history.Outcome, discount int64) history.Op {
	op := history.Op{ID: id, Kind: history.Reserve, Voucher: "V", Customer: customer, Order: order, Amount: 1000,
		Invoke: ms(from), Complete: ms(to), Outcome: outcome}
	switch outcome {
	case history.Ok:
		op.Status, op.Discount = 201, discount
	case history.Fail:
		op.Status, op.Code = 409, "OUT_OF_STOCK"
	case history.Info:
		op.Code = "no answer"
	}
	return op
}

func onOrder(kind history.Kind, id int, order string, from, to int, outcome history.Outcome, code string) history.Op {
	return history.Op{ID: id, Kind: kind, Voucher: "V", Order: order, Invoke: ms(from), Complete: ms(to), Outcome: outcome, Code: code}
}

var twoUses = map[string]history.Voucher{"V": {TotalLimit: 2, PerUserLimit: 1, Discount: 100}}

// The models accept what the system may do, and reject each wrong answer the fault tests
// could not see in the stores: the table's rejected histories are the checker failing.
func TestVoucherHistories(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ops      []history.Op
		vouchers map[string]history.Voucher
		reject   string // a part of the reason; "" for a linearizable history
	}{
		{"a sale that sells out", []history.Op{
			reserve(0, "a", "o1", 0, 10, history.Ok, 100),
			reserve(1, "b", "o2", 2, 12, history.Ok, 100),
			reserve(2, "c", "o3", 3, 11, history.Fail, 0),
			reserve(3, "a", "o1", 20, 21, history.Ok, 100), // a retry gets its grant again
		}, twoUses, ""},
		{"over-allocation", []history.Op{
			reserve(0, "a", "o1", 0, 1, history.Ok, 100),
			reserve(1, "b", "o2", 2, 3, history.Ok, 100),
			reserve(2, "c", "o3", 4, 5, history.Ok, 100),
		}, twoUses, "3 orders certainly hold a use at once; total_limit is 2"},
		{"over-allocation among concurrent grants", []history.Op{
			reserve(0, "a", "o1", 0, 10, history.Ok, 100),
			reserve(1, "b", "o2", 1, 10, history.Ok, 100),
			reserve(2, "c", "o3", 2, 10, history.Ok, 100),
		}, twoUses, "total_limit is 2"},
		{"a grant beyond the customer's limit", []history.Op{
			reserve(0, "a", "o1", 0, 1, history.Ok, 100),
			reserve(1, "a", "o2", 2, 3, history.Ok, 100),
		}, twoUses, "holds 1 of 1"},
		{"a retry answered another discount", []history.Op{
			reserve(0, "a", "o1", 0, 1, history.Ok, 100),
			reserve(1, "a", "o1", 2, 3, history.Ok, 50),
		}, nil, "its retry got 50"},
		{"a retry of a granted order refused", []history.Op{
			reserve(0, "a", "o1", 0, 1, history.Ok, 100),
			reserve(1, "a", "o1", 2, 3, history.Fail, 0),
		}, twoUses, "its retry was refused"},
		{"a retry refused while the first attempt is still writing", []history.Op{
			reserve(0, "a", "o1", 0, 10, history.Ok, 100),
			reserve(1, "a", "o1", 2, 3, history.Fail, 0),
		}, twoUses, ""},
		{"a retry refused after many unknown outcomes and a grant", func() []history.Op {
			var ops []history.Op
			for i := range 25 {
				ops = append(ops, reserve(i, "a", "o1", 2*i, 2*i+1, history.Info, 0))
			}
			return append(ops, reserve(25, "a", "o1", 50, 60, history.Ok, 100), reserve(26, "a", "o1", 61, 62, history.Fail, 0))
		}(), twoUses, "its retry was refused"},
		{"two customers granted one order", []history.Op{
			reserve(0, "a", "o1", 0, 1, history.Ok, 100),
			reserve(1, "b", "o1", 2, 3, history.Ok, 100),
		}, nil, "is a's; granted to b"},
		{"two customers granted one order at once", []history.Op{
			reserve(0, "a", "o1", 0, 10, history.Ok, 100),
			reserve(1, "b", "o1", 1, 9, history.Ok, 100),
		}, nil, "granted to"},
		{"one orderId in two shoppers' own scopes", []history.Op{
			func() history.Op { o := reserve(0, "a", "o1", 0, 1, history.Ok, 100); o.Shopper = true; return o }(),
			func() history.Op { o := reserve(1, "b", "o1", 2, 3, history.Ok, 100); o.Shopper = true; return o }(),
		}, twoUses, ""},
		{"a grant answered as another customer's", []history.Op{
			func() history.Op { o := reserve(0, "a", "o1", 0, 1, history.Ok, 100); o.Holder = "b"; return o }(),
		}, nil, "answered as b's"},
		{"an unknown outcome that took the last use", []history.Op{
			reserve(0, "a", "o1", 0, 5, history.Info, 0),
			reserve(1, "b", "o2", 1, 2, history.Ok, 100),
			reserve(2, "c", "o3", 6, 7, history.Fail, 0),
			reserve(3, "a", "o1", 8, 9, history.Ok, 100),
		}, twoUses, ""},
		{"an unknown outcome that did not take effect", []history.Op{
			reserve(0, "a", "o1", 0, 5, history.Info, 0),
			reserve(1, "b", "o2", 6, 7, history.Ok, 100),
			reserve(2, "c", "o3", 8, 9, history.Ok, 100),
		}, twoUses, ""},
		{"a released order granted again", []history.Op{
			reserve(0, "a", "o1", 0, 1, history.Ok, 100),
			onOrder(history.Release, 1, "o1", 2, 3, history.Ok, ""),
			reserve(2, "a", "o1", 4, 5, history.Ok, 100),
		}, twoUses, "was released"},
		{"a release gives a use back", []history.Op{
			reserve(0, "a", "o1", 0, 1, history.Ok, 100),
			reserve(1, "b", "o2", 0, 1, history.Ok, 100),
			onOrder(history.Release, 2, "o1", 2, 3, history.Ok, ""),
			reserve(3, "c", "o3", 4, 5, history.Ok, 100),
			func() history.Op {
				o := reserve(4, "a", "o1", 6, 7, history.Fail, 0)
				o.Code = "RESERVATION_RELEASED"
				return o
			}(),
		}, twoUses, ""},
		{"a released order confirmed", []history.Op{
			reserve(0, "a", "o1", 0, 1, history.Ok, 100),
			onOrder(history.Release, 1, "o1", 2, 3, history.Ok, ""),
			onOrder(history.Confirm, 2, "o1", 4, 5, history.Ok, ""),
		}, nil, "confirmed, but it is RELEASED"},
		{"a confirmed order released", []history.Op{
			reserve(0, "a", "o1", 0, 1, history.Ok, 100),
			onOrder(history.Confirm, 1, "o1", 2, 3, history.Ok, ""),
			onOrder(history.Release, 2, "o1", 4, 5, history.Ok, ""),
		}, nil, "released, but it is CONFIRMED"},
		{"a grant after the voucher closed", []history.Op{
			reserve(0, "a", "o1", 0, 1, history.Ok, 100),
			onOrder(history.Close, 1, "", 2, 3, history.Ok, ""),
			reserve(2, "a", "o1", 4, 5, history.Ok, 100), // a granted order keeps its grant
			reserve(3, "b", "o2", 4, 5, history.Ok, 100),
		}, twoUses, "after the voucher closed"},
		{"a refund gives the use back: the next customer is granted it", []history.Op{
			reserve(0, "a", "o1", 0, 1, history.Ok, 100),
			reserve(1, "b", "o2", 2, 3, history.Ok, 100),
			onOrder(history.Confirm, 2, "o1", 4, 5, history.Ok, ""),
			onOrder(history.Refund, 3, "o1", 6, 7, history.Ok, ""),
			onOrder(history.Refund, 4, "o1", 8, 9, history.Ok, ""), // again: the same
			reserve(5, "c", "o3", 10, 11, history.Ok, 100),
			reserve(6, "a", "o1", 12, 13, history.Fail, 0), // a refunded order is not granted again
		}, twoUses, ""},
		{"a refunded order granted again", []history.Op{
			reserve(0, "a", "o1", 0, 1, history.Ok, 100),
			onOrder(history.Confirm, 1, "o1", 2, 3, history.Ok, ""),
			onOrder(history.Refund, 2, "o1", 4, 5, history.Ok, ""),
			reserve(3, "a", "o1", 6, 7, history.Ok, 100),
		}, twoUses, "was refunded"},
		{"a reservation refunded before it was confirmed", []history.Op{
			reserve(0, "a", "o1", 0, 1, history.Ok, 100),
			onOrder(history.Refund, 1, "o1", 2, 3, history.Ok, ""),
		}, twoUses, "refunded, but it is RESERVED"},
		{"a refund's use given twice: over-allocation after it", []history.Op{
			reserve(0, "a", "o1", 0, 1, history.Ok, 100),
			reserve(1, "b", "o2", 2, 3, history.Ok, 100),
			onOrder(history.Confirm, 2, "o1", 4, 5, history.Ok, ""),
			onOrder(history.Refund, 3, "o1", 6, 7, history.Ok, ""),
			reserve(4, "c", "o3", 8, 9, history.Ok, 100),
			reserve(5, "d", "o4", 10, 11, history.Ok, 100),
		}, twoUses, "total_limit is 2"},
		{"a released order refunded", []history.Op{
			reserve(0, "a", "o1", 0, 1, history.Ok, 100),
			onOrder(history.Release, 1, "o1", 2, 3, history.Ok, ""),
			onOrder(history.Refund, 2, "o1", 4, 5, history.Ok, ""),
		}, twoUses, "refunded, but it is RELEASED"},
		{"a hold expired gives its use back", []history.Op{
			reserve(0, "a", "o1", 0, 1, history.Ok, 100),
			reserve(1, "b", "o2", 0, 1, history.Ok, 100),
			onOrder(history.Expire, 2, "o1", 4, 4, history.Info, "hold due"),
			onOrder(history.Confirm, 3, "o1", 6, 7, history.Fail, "RESERVATION_RELEASED"),
			reserve(4, "c", "o3", 8, 9, history.Ok, 100),
			onOrder(history.Expire, 5, "o2", 10, 10, history.Info, "hold due"),
			onOrder(history.Confirm, 6, "o2", 11, 12, history.Ok, ""), // confirmed before the job came
			onOrder(history.Confirm, 7, "o2", 13, 14, history.Ok, ""),
		}, twoUses, ""},
		{"a confirm refused as released before the hold came due", []history.Op{
			reserve(0, "a", "o1", 0, 1, history.Ok, 100),
			onOrder(history.Confirm, 1, "o1", 2, 3, history.Fail, "RESERVATION_RELEASED"),
			onOrder(history.Expire, 2, "o1", 5, 5, history.Info, "hold due"),
		}, twoUses, "refused as released, but it is RESERVED"},
		{"a use granted again before the hold giving it back came due", []history.Op{
			reserve(0, "a", "o1", 0, 1, history.Ok, 100),
			reserve(1, "b", "o2", 0, 1, history.Ok, 100),
			reserve(2, "c", "o3", 2, 3, history.Ok, 100),
			onOrder(history.Expire, 3, "o1", 5, 5, history.Info, "hold due"),
		}, twoUses, "3 orders certainly hold a use at once"},
		{"an expired order confirmed", []history.Op{
			reserve(0, "a", "o1", 0, 1, history.Ok, 100),
			onOrder(history.Expire, 1, "o1", 2, 2, history.Info, "hold due"),
			onOrder(history.Confirm, 2, "o1", 3, 4, history.Fail, "RESERVATION_RELEASED"),
			onOrder(history.Confirm, 3, "o1", 5, 6, history.Ok, ""),
		}, twoUses, "confirmed, but it is RELEASED"},
		{"one orderId granted on two vouchers", []history.Op{
			reserve(0, "a", "o1", 0, 1, history.Ok, 100),
			func() history.Op { o := reserve(1, "a", "o1", 2, 3, history.Ok, 100); o.Voucher = "W"; return o }(),
		}, nil, "on voucher V and on voucher W"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := history.Check(tc.ops, tc.vouchers)
			report := res.Report("")
			switch {
			case tc.reject == "" && !res.Linearizable():
				t.Fatalf("rejected a linearizable history:\n%s", report)
			case tc.reject != "" && res.Linearizable():
				t.Fatalf("accepted a history that is not linearizable (%s)", tc.reject)
			case tc.reject != "" && !strings.Contains(report, tc.reject):
				t.Fatalf("rejected, but the report does not say %q:\n%s", tc.reject, report)
			}
			if !res.Linearizable() {
				t.Logf("%s", report)
			}
		})
	}
}

func deduct(id int, key string, from, to int, outcome history.Outcome, amount, used int64, identities ...string) history.Op {
	op := history.Op{ID: id, Kind: history.Deduct, Biz: 1, IdemKey: key, Invoke: ms(from), Complete: ms(to), Outcome: outcome}
	for _, ident := range identities {
		typ, who, _ := strings.Cut(ident, ":")
		op.Items = append(op.Items, history.Item{Type: typ, Identity: who, Dimensions: []string{"ITEM:1"}, Amount: amount})
		if outcome == history.Ok {
			op.Counters = append(op.Counters, history.Counter{Type: typ, Identity: who, Dimension: "ITEM:1",
				Window: "DAY/UTC", Period: "20250303", Used: used, Limit: 3})
		}
	}
	switch outcome {
	case history.Fail:
		op.Code = "QUOTA_EXCEEDED"
	case history.Info:
		op.Code = "UNAVAILABLE"
	}
	return op
}

func rollback(id int, key string, from, to int, gaveBack int64, identities ...string) history.Op {
	op := history.Op{ID: id, Kind: history.Rollback, Biz: 1, IdemKey: key, Invoke: ms(from), Complete: ms(to), Outcome: history.Ok}
	if gaveBack > 0 {
		for _, ident := range identities {
			typ, who, _ := strings.Cut(ident, ":")
			op.Returned = append(op.Returned, history.Counter{Type: typ, Identity: who, Dimension: "ITEM:1", Window: "DAY/UTC", Used: gaveBack})
		}
	}
	return op
}

// partial is a partial rollback of key, as rollbackKey rk, of amount on each identity, answered
// gaveBack on each.
func partial(id int, key, rk string, from, to int, amount, gaveBack int64, identities ...string) history.Op {
	op := history.Op{ID: id, Kind: history.PartialRollback, Biz: 1, IdemKey: key, RollbackKey: rk, Invoke: ms(from), Complete: ms(to), Outcome: history.Ok}
	for _, ident := range identities {
		typ, who, _ := strings.Cut(ident, ":")
		op.Items = append(op.Items, history.Item{Type: typ, Identity: who, Dimensions: []string{"ITEM:1"}, Amount: amount})
		if gaveBack > 0 {
			op.Returned = append(op.Returned, history.Counter{Type: typ, Identity: who, Dimension: "ITEM:1", Window: "DAY/UTC", Used: gaveBack})
		}
	}
	return op
}

// reusedKey makes op a partial rollback refused ROLLBACK_KEY_REUSED.
func reusedKey(op history.Op) history.Op {
	op.Outcome, op.Code, op.Returned = history.Fail, wire.CodeRollbackKeyReused, nil
	return op
}

// roomy gives every counter the ops answer a limit of 1000, for histories about counts, not limits.
func roomy(ops ...history.Op) []history.Op {
	for i := range ops {
		for j := range ops[i].Counters {
			ops[i].Counters[j].Limit = 1000
		}
	}
	return ops
}

func usage(id int, from, to int, used int64) history.Op {
	return history.Op{ID: id, Kind: history.Usage, Biz: 1, Identity: "USER:u", Invoke: ms(from), Complete: ms(to), Outcome: history.Ok,
		Counters: []history.Counter{{Type: "USER", Identity: "u", Dimension: "ITEM:1", Window: "DAY/UTC", Period: "20250303", Used: used, Limit: 3}}}
}

func TestQuotaHistories(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ops    []history.Op
		reject string
	}{
		{"concurrent deducts up to the limit", []history.Op{
			deduct(0, "k1", 0, 10, history.Ok, 1, 2, "USER:u"),
			deduct(1, "k2", 1, 9, history.Ok, 1, 1, "USER:u"),
			deduct(2, "k3", 2, 11, history.Ok, 1, 3, "USER:u"),
			deduct(3, "k4", 3, 12, history.Fail, 1, 0, "USER:u"),
			usage(4, 20, 21, 3),
		}, ""},
		{"a deduct counted twice", []history.Op{
			deduct(0, "k1", 0, 1, history.Ok, 1, 1, "USER:u"),
			deduct(1, "k1", 2, 3, history.Ok, 1, 2, "USER:u"),
		}, "its retry got"},
		{"a deduct counted twice, seen by a read", []history.Op{
			deduct(0, "k1", 0, 1, history.Ok, 1, 1, "USER:u"),
			deduct(1, "k1", 2, 3, history.Ok, 1, 1, "USER:u"),
			usage(2, 4, 5, 2),
		}, "usage read 2"},
		{"retries of one idemKey at once, one count", []history.Op{
			deduct(0, "k1", 0, 10, history.Ok, 2, 2, "USER:u"),
			deduct(1, "k1", 1, 9, history.Ok, 2, 2, "USER:u"),
			deduct(2, "k1", 2, 11, history.Ok, 2, 2, "USER:u"),
			usage(3, 12, 13, 2),
		}, ""},
		{"a deduct over the limit", []history.Op{
			deduct(0, "k1", 0, 1, history.Ok, 2, 2, "USER:u"),
			deduct(1, "k2", 2, 3, history.Ok, 2, 4, "USER:u"),
		}, "held 2 of 3"},
		{"a granted deduct's retry refused", []history.Op{
			deduct(0, "k1", 0, 1, history.Ok, 1, 1, "USER:u"),
			deduct(1, "k1", 2, 3, history.Fail, 1, 0, "USER:u"),
		}, "its retry was refused"},
		{"an unknown outcome replayed by its retry", []history.Op{
			deduct(0, "k1", 0, 5, history.Info, 1, 0, "USER:u"),
			deduct(1, "k2", 1, 2, history.Ok, 1, 1, "USER:u"),
			deduct(2, "k1", 6, 7, history.Ok, 1, 2, "USER:u"),
			usage(3, 8, 9, 2),
		}, ""},
		{"a rollback gives back once", []history.Op{
			deduct(0, "k1", 0, 1, history.Ok, 2, 2, "USER:u"),
			rollback(1, "k1", 2, 10, 2, "USER:u"),
			rollback(2, "k1", 3, 9, 0, "USER:u"),
			usage(3, 11, 12, 0),
		}, ""},
		{"a rollback given back twice", []history.Op{
			deduct(0, "k1", 0, 1, history.Ok, 2, 2, "USER:u"),
			rollback(1, "k1", 2, 3, 2, "USER:u"),
			rollback(2, "k1", 4, 5, 2, "USER:u"),
		}, "counts nothing here"},
		{"a deduct granted after its rollback", []history.Op{
			rollback(0, "k1", 0, 1, 0, "USER:u"),
			deduct(1, "k1", 2, 3, history.Ok, 1, 1, "USER:u"),
		}, "was rolled back"},
		{"a rollback racing its deduct gives back the steps it held", []history.Op{
			deduct(0, "k1", 0, 10, history.Fail, 1, 0, "USER:u", "PHONE:p"),
			rollback(1, "k1", 2, 8, 1, "USER:u"),
			usage(2, 11, 12, 0),
		}, ""},
		{"a rollback giving back what no deduct held", []history.Op{
			deduct(0, "k1", 0, 1, history.Fail, 1, 0, "USER:u", "PHONE:p"),
			rollback(1, "k1", 2, 3, 1, "USER:u"),
		}, "counts nothing here"},
		{"a request of two identities refused at the second", []history.Op{
			deduct(0, "full", 0, 1, history.Ok, 3, 3, "PHONE:p"),
			deduct(1, "k1", 2, 10, history.Fail, 1, 0, "USER:u", "PHONE:p"),
			deduct(2, "k2", 3, 4, history.Ok, 1, 2, "USER:u"), // saw k1's step held on USER
			usage(3, 11, 12, 1),
		}, ""},
		// Where an unknown outcome or a refused request of several identities makes answered
		// values uncertain, they are still bounded above: a count no operation explains is caught.
		{"an unknown outcome that counted, seen by later answers", roomy(
			deduct(0, "k0", 0, 1, history.Info, 1, 0, "USER:u"),
			deduct(1, "k1", 2, 3, history.Ok, 1, 2, "USER:u"),
			usage(2, 4, 5, 2),
		), ""},
		{"a deduct counted twice where an unknown outcome may have counted", roomy(
			deduct(0, "k0", 0, 1, history.Info, 1, 0, "USER:u"),
			deduct(1, "k1", 2, 3, history.Ok, 1, 2, "USER:u"),
			deduct(2, "k1", 4, 5, history.Ok, 1, 2, "USER:u"), // its answer replayed, but counted again
			deduct(3, "k2", 6, 7, history.Ok, 1, 4, "USER:u"),
		), "at most 1 more no answer shows: answered 4, more"},
		{"a deduct counted twice after a refused request of two identities", roomy(
			deduct(0, "k0", 0, 10, history.Fail, 1, 0, "USER:u", "PHONE:p"),
			deduct(1, "k1", 20, 21, history.Ok, 1, 1, "USER:u"),
			deduct(2, "k1", 22, 23, history.Ok, 1, 1, "USER:u"), // its answer replayed, but counted again
			usage(3, 24, 25, 2),
		), "usage read 2 on ITEM:1|DAY/UTC|20250303, which holds 1 and at most 0 more"},
		{"a deduct counted twice while a refused request of two identities runs", roomy(
			deduct(0, "k0", 0, 10, history.Fail, 1, 0, "USER:u", "PHONE:p"),
			deduct(1, "k1", 1, 2, history.Ok, 1, 1, "USER:u"),
			deduct(2, "k1", 3, 4, history.Ok, 1, 1, "USER:u"), // its answer replayed, but counted again
			deduct(3, "k2", 5, 6, history.Ok, 1, 4, "USER:u"), // k0's step held: 3 at most
		), "at most 1 more no answer shows: answered 4, more"},
		{"partial rollbacks give back what was taken once, a whole rollback the rest", []history.Op{
			deduct(0, "k1", 0, 1, history.Ok, 3, 3, "USER:u"),
			partial(1, "k1", "p1", 2, 3, 1, 1, "USER:u"),
			partial(2, "k1", "p1", 4, 5, 1, 1, "USER:u"), // again: its answer, nothing more
			partial(3, "k1", "p2", 6, 7, 1, 1, "USER:u"),
			usage(4, 8, 9, 1),
			rollback(5, "k1", 10, 11, 1, "USER:u"),
			partial(6, "k1", "p3", 12, 13, 1, 0, "USER:u"),
			usage(7, 14, 15, 0),
		}, ""},
		{"a partial rollback racing the whole rollback", []history.Op{
			deduct(0, "k1", 0, 1, history.Ok, 2, 2, "USER:u"),
			rollback(1, "k1", 2, 10, 1, "USER:u"),
			partial(2, "k1", "p1", 3, 4, 1, 1, "USER:u"),
			usage(3, 11, 12, 0),
		}, ""},
		{"partial rollbacks giving back more than was taken", []history.Op{
			deduct(0, "k1", 0, 1, history.Ok, 2, 2, "USER:u"),
			partial(1, "k1", "p1", 2, 3, 1, 1, "USER:u"),
			partial(2, "k1", "p2", 2, 3, 1, 1, "USER:u"),
			partial(3, "k1", "p3", 2, 3, 1, 1, "USER:u"),
		}, "which has nothing left here"},
		{"a whole rollback giving back what a partial one gave back already", []history.Op{
			deduct(0, "k1", 0, 1, history.Ok, 2, 2, "USER:u"),
			partial(1, "k1", "p1", 2, 3, 1, 1, "USER:u"),
			rollback(2, "k1", 4, 5, 2, "USER:u"),
		}, "ITEM:1|DAY/UTC|20250303=1 given back before"},
		{"a rollbackKey sent again gives back again", []history.Op{
			deduct(0, "k1", 0, 1, history.Ok, 2, 2, "USER:u"),
			partial(1, "k1", "p1", 2, 3, 1, 1, "USER:u"),
			partial(2, "k1", "p1", 4, 5, 1, 1, "USER:u"),
			usage(3, 6, 7, 0),
		}, "usage read 0"},
		{"a rollbackKey answered otherwise when sent again", []history.Op{
			deduct(0, "k1", 0, 1, history.Ok, 2, 2, "USER:u"),
			partial(1, "k1", "p1", 2, 3, 1, 1, "USER:u"),
			partial(2, "k1", "p1", 4, 5, 1, 0, "USER:u"),
		}, "sent again it answered"},
		{"a rollbackKey reused with other items", []history.Op{
			deduct(0, "k1", 0, 1, history.Ok, 2, 2, "USER:u"),
			partial(1, "k1", "p1", 2, 3, 1, 1, "USER:u"),
			partial(2, "k1", "p1", 4, 5, 2, 1, "USER:u"),
		}, "gave back for other items"},
		{"a rollbackKey given for one identity, refused as reused for another", []history.Op{
			deduct(0, "k1", 0, 1, history.Ok, 1, 1, "USER:u", "PHONE:p"),
			partial(1, "k1", "p1", 2, 3, 1, 1, "USER:u"),
			reusedKey(partial(2, "k1", "p1", 4, 5, 1, 0, "PHONE:p")),
			usage(3, 6, 7, 0),
		}, ""},
		{"a rollbackKey refused as reused when sent again with its own items", []history.Op{
			deduct(0, "k1", 0, 1, history.Ok, 2, 2, "USER:u"),
			partial(1, "k1", "p1", 2, 3, 1, 1, "USER:u"),
			reusedKey(partial(2, "k1", "p1", 4, 5, 1, 0, "USER:u")),
		}, "refused as reused"},
		{"a partial rollback of a deduct refused", []history.Op{
			deduct(0, "k1", 0, 1, history.Fail, 1, 0, "USER:u"),
			partial(1, "k1", "p1", 2, 3, 1, 1, "USER:u"),
		}, "which counts nothing here"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := history.Check(tc.ops, nil)
			report := res.Report("")
			switch {
			case tc.reject == "" && !res.Linearizable():
				t.Fatalf("rejected a linearizable history:\n%s", report)
			case tc.reject != "" && res.Linearizable():
				t.Fatalf("accepted a history that is not linearizable (%s)", tc.reject)
			case tc.reject != "" && !strings.Contains(report, tc.reject):
				t.Fatalf("rejected, but the report does not say %q:\n%s", tc.reject, report)
			}
			if !res.Linearizable() {
				t.Logf("%s", report)
			}
		})
	}
}

// The smallest failing window ends with the first answer no order explains, however long the
// history goes on after it, and a recorder's calls make the history the checker reads.
func TestSmallestFailingWindow(t *testing.T) {
	r := history.NewRecorder()
	r.Voucher("V", history.Voucher{TotalLimit: 5, PerUserLimit: 1, Discount: 100})
	grant := func(customer, order string) {
		c := r.Begin(history.Op{Kind: history.Reserve, Voucher: "V", Customer: customer, Order: order})
		c.Op.Status, c.Op.Discount = 201, 100
		c.Ok()
	}
	for i := range 5 {
		grant(fmt.Sprint("c", i), fmt.Sprint("o", i))
	}
	grant("late", "o-late") // the sixth use of five
	for i := range 20 {
		c := r.Begin(history.Op{Kind: history.Reserve, Voucher: "V", Customer: fmt.Sprint("c", i), Order: fmt.Sprint("o", i)})
		if i < 5 {
			c.Op.Status, c.Op.Discount = 201, 100
			c.Ok()
		} else {
			c.Fail("OUT_OF_STOCK")
		}
	}
	r.Begin(history.Op{Kind: history.Reserve, Voucher: "V", Customer: "gone", Order: "o-gone"}) // never ends

	res := r.Check()
	if res.Linearizable() || len(res.Failures) != 1 {
		t.Fatalf("want one rejected partition:\n%s", res.Report(""))
	}
	f := res.Failures[0]
	if f.Culprit.Order != "o-late" || !strings.Contains(f.Reason, "6 orders certainly hold a use at once") {
		t.Errorf("culprit %+v because %q; want o-late's grant, all uses taken", f.Culprit, f.Reason)
	}
	for _, op := range f.Window {
		if op.ID > f.Culprit.ID {
			t.Errorf("the window holds %+v, invoked after the culprit completed", op)
		}
	}
	t.Logf("%s", f)

	var html strings.Builder
	if err := f.Visualize(&html); err != nil || !strings.Contains(html.String(), "<html") {
		t.Errorf("visualization: %v (%d bytes)", err, html.Len())
	}
}

// spy is a test that records its failures instead of failing.
type spy struct {
	testing.TB
	name    string
	errs    []string
	cleanup []func()
}

// Unknown outcomes lost in a failover and counted anew by their retries, with reads between:
// each retry's answer tells where its unknown outcome could have counted, so the search stays
// small however many there are.
func TestManyUnknownOutcomesRetriedAreQuickToCheck(t *testing.T) {
	var ops []history.Op
	id := 0
	add := func(op history.Op) { op.ID = id; id++; ops = append(ops, op) }
	add(deduct(0, "before", 0, 1, history.Ok, 1, 1, "USER:u"))
	for i := range 30 {
		add(deduct(0, fmt.Sprint("k", i), 2+i, 3+i, history.Info, 1, 0, "USER:u"))
	}
	add(usage(0, 100, 101, 1))
	for i := range 30 {
		op := deduct(0, fmt.Sprint("k", i), 200+2*i, 201+2*i, history.Ok, 1, int64(2+i), "USER:u")
		op.Counters[0].Limit = 1000
		add(op)
	}
	add(usage(0, 300, 301, 31))
	for i := range ops {
		for j := range ops[i].Counters {
			ops[i].Counters[j].Limit = 1000
		}
	}
	res := history.Check(ops, nil)
	if !res.Linearizable() || len(res.Undecided) > 0 {
		t.Fatalf("rejected or undecided (%v):\n%s", res.Undecided, res.Report(""))
	}
	t.Logf("%d operations checked in %s", res.Ops, res.Took)
}

func (s *spy) Name() string                 { return s.name }
func (s *spy) Helper()                      {}
func (s *spy) Failed() bool                 { return len(s.errs) > 0 }
func (s *spy) Errorf(f string, args ...any) { s.errs = append(s.errs, fmt.Sprintf(f, args...)) }
func (s *spy) Logf(f string, args ...any)   { s.TB.Logf(f, args...) }
func (s *spy) Cleanup(f func())             { s.cleanup = append(s.cleanup, f) }
func (s *spy) end() {
	for _, f := range s.cleanup {
		f()
	}
}

// A test whose history is rejected fails with the report, and its history is kept as JSON
// lines beside the view of the rejected partition; the same recorder serves every call of For.
func TestForFailsTheTestAndKeepsTheHistory(t *testing.T) {
	s := &spy{TB: t, name: t.Name() + "/broken sale"}
	r := history.For(s)
	if history.For(s) != r {
		t.Fatal("For returned a second recorder for one test")
	}
	for _, customer := range []string{"a", "b"} { // one order, two customers
		c := r.Begin(history.Op{Kind: history.Reserve, Voucher: "V", Customer: customer, Order: "o1"})
		c.Op.Status, c.Op.Discount = 201, 100
		c.Ok()
	}
	s.end()
	if len(s.errs) != 1 || !strings.Contains(s.errs[0], "history not linearizable") {
		t.Fatalf("the test failed with %q; want the checker's report", s.errs)
	}
	dir := history.Dir(s.name)
	t.Cleanup(func() { os.RemoveAll(dir) })
	raw, err := os.ReadFile(filepath.Join(dir, "history.jsonl"))
	if err != nil || strings.Count(string(raw), "\n") != 2 || !strings.Contains(string(raw), `"customer":"b"`) {
		t.Errorf("history.jsonl: %q %v; want the voucher and both operations", raw, err)
	}
	views, _ := filepath.Glob(filepath.Join(dir, "voucher_V_*.html"))
	if len(views) != 1 {
		t.Errorf("views of the rejected partition: %v; want one", views)
	}
	if !strings.Contains(s.errs[0], dir) {
		t.Errorf("the report does not name %s:\n%s", dir, s.errs[0])
	}
}

// A partition the check cannot decide within Timeout fails the test as a rejected one does: a
// history nobody checked proves nothing.
func TestAnUndecidedPartitionFailsTheTest(t *testing.T) {
	old := history.Timeout
	history.Timeout = time.Nanosecond // over before the search of 200 concurrent deducts ends
	t.Cleanup(func() { history.Timeout = old })

	s := &spy{TB: t, name: t.Name() + "/slow check"}
	r := history.For(s)
	var calls []*history.Call
	for i := range 200 {
		calls = append(calls, r.Begin(history.Op{Kind: history.Deduct, Biz: 1, IdemKey: fmt.Sprint("k", i),
			Items: []history.Item{{Type: "USER", Identity: "u", Dimensions: []string{"ITEM:1"}, Amount: 1}}}))
	}
	for i, c := range calls {
		c.Op.Counters = []history.Counter{{Type: "USER", Identity: "u", Dimension: "ITEM:1", Window: "DAY/UTC", Used: int64(i + 1), Limit: 1000}}
		c.Ok()
	}
	s.end()
	t.Cleanup(func() { os.RemoveAll(history.Dir(s.name)) })
	if len(s.errs) != 1 || !strings.Contains(s.errs[0], "not decided") || !strings.Contains(s.errs[0], "quota 1/USER:u") {
		t.Fatalf("the test failed with %q; want the undecided partition named", s.errs)
	}
	t.Logf("%s", s.errs[0])
}
