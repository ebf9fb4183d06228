// Package gate is the flash-sale admission in Redis: each call is one Lua script (lua/), one
// round trip, atomic, on the hash-tagged keys of one voucher, so it also runs on Redis Cluster.
package gate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"vouchergate/backend/notify"
	"vouchergate/backend/voucher"
	"vouchergate/lua"
	"vouchergate/shared/keys"
)

// Gate implements voucher.Gate. It is safe for concurrent use.
type Gate struct {
	rdb      redis.UniversalClient
	prefix   string
	reserves *pipeline // reserve.lua calls, auto-pipelined: the one call a flash sale's crowd makes
}

// New returns a gate on rdb whose keys start with prefix.
func New(rdb redis.UniversalClient, prefix string) *Gate {
	return &Gate{rdb: rdb, prefix: prefix, reserves: newPipeline(rdb)}
}

func (g *Gate) keys(code string) keys.Voucher { return keys.ForVoucher(g.prefix, code) }

// formatHolder is the orders hash value: "reservedAtMillis:attempt:customerId".
func formatHolder(h voucher.Holder) string {
	return strconv.FormatInt(h.ReservedAt.UnixMilli(), 10) + ":" + h.Attempt + ":" + h.CustomerID
}

func parseHolder(s string) (voucher.Holder, error) {
	ms, rest, ok1 := strings.Cut(s, ":")
	attempt, customer, ok2 := strings.Cut(rest, ":")
	n, err := strconv.ParseInt(ms, 10, 64)
	if !ok1 || !ok2 || err != nil {
		return voucher.Holder{}, fmt.Errorf("malformed holder %q", s)
	}
	return voucher.Holder{CustomerID: customer, ReservedAt: time.UnixMilli(n), Attempt: attempt}, nil
}

// Reserve runs reserve.lua.
func (g *Gate) Reserve(ctx context.Context, v voucher.Voucher, orderID string, h voucher.Holder) (voucher.GateResult, error) {
	res, err := g.reserves.run(ctx, g.keys(v.Code).List(),
		[reserveArgs]any{h.CustomerID, v.PerUserLimit, orderID, formatHolder(h), v.Revision})
	if err != nil {
		return voucher.GateResult{}, fmt.Errorf("gate reserve %s: %w", v.Code, err)
	}
	outcome, detail, err := statusAndDetail(res)
	if err != nil {
		return voucher.GateResult{}, fmt.Errorf("gate reserve %s: %w", v.Code, err)
	}
	r := voucher.GateResult{Outcome: reserveOutcomes[outcome]}
	if r.Outcome == 0 {
		return voucher.GateResult{}, fmt.Errorf("gate reserve %s: script replied outcome %d", v.Code, outcome)
	}
	switch r.Outcome {
	case voucher.GateReserved:
		r.Remaining, _ = detail.(int64)
	case voucher.GateHeld:
		s, _ := detail.(string)
		if r.Holder, err = parseHolder(s); err != nil {
			return voucher.GateResult{}, fmt.Errorf("gate reserve %s: order %s: %w", v.Code, orderID, err)
		}
	case voucher.GateStale:
		s, _ := detail.(string)
		if r.Revision, err = strconv.ParseInt(s, 10, 64); err != nil {
			return voucher.GateResult{}, fmt.Errorf("gate reserve %s: revision held %q: %w", v.Code, s, err)
		}
	}
	return r, nil
}

// reserveOutcomes are reserve.lua's return codes (see its header).
var reserveOutcomes = map[int64]voucher.GateOutcome{
	1: voucher.GateReserved, 0: voucher.GateHeld, -1: voucher.GateOutOfStock, -2: voucher.GateAtLimit,
	-3: voucher.GateNotLoaded, -4: voucher.GateStale, -5: voucher.GatePaused,
}

// Configure runs configure.lua.
func (g *Gate) Configure(ctx context.Context, v voucher.Voucher, mode voucher.ConfigureMode) (voucher.Configured, error) {
	when, checked := "newer", "0"
	if mode&voucher.ConfigureForce != 0 {
		when = "force"
	}
	if mode&voucher.ConfigureChecked != 0 {
		checked = "1"
	}
	res, err := lua.Configure.Run(ctx, g.rdb, g.keys(v.Code).List(),
		v.Revision, v.TotalLimit, v.PerUserLimit, pausedArg(v), when, checked).Int64Slice()
	if err != nil || len(res) != 5 {
		return voucher.Configured{}, fmt.Errorf("gate configure %s: replied %v: %w", v.Code, res, err)
	}
	return voucher.Configured{Applied: res[0] == 1, Refused: res[0] == -2, Loaded: res[4] == 1,
		Remaining: res[1], Held: res[2], HeldRevision: res[3]}, nil
}

// pausedArg is how the scripts take a voucher's pause.
func pausedArg(v voucher.Voucher) string {
	if v.Paused {
		return "1"
	}
	return "0"
}

// Release runs release.lua.
func (g *Gate) Release(ctx context.Context, code, orderID string, expect *voucher.Holder) (bool, int64, error) {
	k := g.keys(code)
	want := ""
	if expect != nil {
		want = formatHolder(*expect)
	}
	res, err := lua.Release.Run(ctx, g.rdb, k.List(), orderID, want).Slice()
	if err != nil {
		return false, 0, fmt.Errorf("gate release %s/%s: %w", code, orderID, err)
	}
	status, detail, err := statusAndDetail(res)
	if err != nil {
		return false, 0, fmt.Errorf("gate release %s/%s: %w", code, orderID, err)
	}
	remaining, _ := detail.(int64)
	return status == 1, remaining, nil
}

// Load runs load.lua with the voucher's active redemptions.
func (g *Gate) Load(ctx context.Context, v voucher.Voucher, active []voucher.Redemption) (int64, error) {
	args := make([]any, 0, 4+3*len(active))
	args = append(args, v.TotalLimit, v.Revision, v.PerUserLimit, pausedArg(v))
	for _, r := range active {
		args = append(args, r.OrderID, formatHolder(voucher.Holder{CustomerID: r.CustomerID, ReservedAt: r.ReservedAt, Attempt: voucher.LoadedAttempt}), r.CustomerID)
	}
	res, err := lua.Load.Run(ctx, g.rdb, g.keys(v.Code).List(), args...).Slice()
	if err != nil {
		return 0, fmt.Errorf("gate load %s: %w", v.Code, err)
	}
	_, detail, err := statusAndDetail(res)
	if err != nil {
		return 0, fmt.Errorf("gate load %s: %w", v.Code, err)
	}
	remaining, _ := detail.(int64)
	return remaining, nil
}

// Holding returns the holder of orderID.
func (g *Gate) Holding(ctx context.Context, code, orderID string) (voucher.Holder, bool, error) {
	s, err := g.rdb.HGet(ctx, g.keys(code).Orders, orderID).Result()
	if errors.Is(err, redis.Nil) {
		return voucher.Holder{}, false, nil
	}
	if err != nil {
		return voucher.Holder{}, false, fmt.Errorf("gate holding %s/%s: %w", code, orderID, err)
	}
	h, err := parseHolder(s)
	if err != nil {
		return voucher.Holder{}, false, fmt.Errorf("gate holding %s/%s: %w", code, orderID, err)
	}
	return h, true, nil
}

// Peek runs peek.lua, which changes nothing.
func (g *Gate) Peek(ctx context.Context, code, orderID, customerID string) (voucher.GatePeek, error) {
	res, err := lua.Peek.Run(ctx, g.rdb, g.keys(code).List(), customerID, orderID).Slice()
	if err != nil {
		return voucher.GatePeek{}, fmt.Errorf("gate peek %s/%s: %w", code, orderID, err)
	}
	var status int64 = 2 // none of the replies below
	if len(res) > 0 {
		status, _ = res[0].(int64)
	}
	switch {
	case status == 1 && len(res) == 2:
		s, _ := res[1].(string)
		h, err := parseHolder(s)
		if err != nil {
			return voucher.GatePeek{}, fmt.Errorf("gate peek %s/%s: %w", code, orderID, err)
		}
		return voucher.GatePeek{Loaded: true, Holder: &h}, nil
	case status == -3:
		return voucher.GatePeek{}, nil
	case status == 0 && len(res) == 3:
		remaining, ok1 := res[1].(int64)
		uses, ok2 := res[2].(int64)
		if ok1 && ok2 {
			return voucher.GatePeek{Loaded: true, Remaining: remaining, CustomerUses: uses}, nil
		}
	}
	return voucher.GatePeek{}, fmt.Errorf("gate peek %s/%s: script replied %v", code, orderID, res)
}

// Remaining returns the uses left and whether the voucher is loaded.
func (g *Gate) Remaining(ctx context.Context, code string) (int64, bool, error) {
	n, err := g.rdb.Get(ctx, g.keys(code).Remaining).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("gate remaining %s: %w", code, err)
	}
	return n, true, nil
}

// Forget deletes the voucher's keys (one hash slot: one call, on a cluster too), and reports
// whether it had any.
func (g *Gate) Forget(ctx context.Context, code string) (bool, error) {
	n, err := g.rdb.Del(ctx, g.keys(code).List()...).Result()
	if err != nil {
		return false, fmt.Errorf("gate forget %s: %w", code, err)
	}
	return n > 0, nil
}

// Orders lists the orderIds holding a use.
func (g *Gate) Orders(ctx context.Context, code string) ([]string, error) {
	ids, err := g.rdb.HKeys(ctx, g.keys(code).Orders).Result()
	if err != nil {
		return nil, fmt.Errorf("gate orders %s: %w", code, err)
	}
	return ids, nil
}

// Missing returns those of rs whose order holds no use for the row's customer.
func (g *Gate) Missing(ctx context.Context, code string, rs []voucher.Redemption) ([]voucher.Redemption, error) {
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.OrderID
	}
	held, err := g.rdb.HMGet(ctx, g.keys(code).Orders, ids...).Result()
	if err != nil {
		return nil, fmt.Errorf("gate missing %s: %w", code, err)
	}
	var missing []voucher.Redemption
	for i, h := range held {
		s, _ := h.(string)
		if h == nil || holderCustomer(s) != rs[i].CustomerID {
			missing = append(missing, rs[i])
		}
	}
	return missing, nil
}

// holderCustomer is the customerId of an orders hash value, "" if malformed.
func holderCustomer(s string) string {
	h, err := parseHolder(s)
	if err != nil {
		return ""
	}
	return h.CustomerID
}

// Snapshot runs state.lua: remaining, the version and, when sold out, the holders, read in one
// atomic step, so the version names exactly that state. It makes a Gate a notify.Reader.
func (g *Gate) Snapshot(ctx context.Context, code string) (notify.Snapshot, error) {
	res, err := lua.State.Run(ctx, g.rdb, g.keys(code).List()).Slice()
	if err != nil {
		return notify.Snapshot{}, fmt.Errorf("gate state %s: %w", code, err)
	}
	snap, err := parseSnapshot(res)
	if err != nil {
		return notify.Snapshot{}, fmt.Errorf("gate state %s: %w", code, err)
	}
	return snap, nil
}

// parseSnapshot reads state.lua's {loaded, remaining, version, orderIds, paused} reply.
func parseSnapshot(res []any) (notify.Snapshot, error) {
	const want = "expected {loaded, remaining, version, orderIds, paused}"
	if len(res) != 5 {
		return notify.Snapshot{}, fmt.Errorf("script replied %v; %s", res, want)
	}
	loaded, ok1 := res[0].(int64)
	remaining, ok2 := res[1].(int64)
	vs, ok3 := res[2].(string)
	ids, ok4 := res[3].([]any)
	paused, ok5 := res[4].(int64)
	version, err := strconv.ParseUint(vs, 10, 64)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || err != nil {
		return notify.Snapshot{}, fmt.Errorf("script replied %v; %s", res, want)
	}
	snap := notify.Snapshot{Loaded: loaded == 1, Remaining: remaining, Version: version, Paused: paused == 1,
		Orders: make([]string, len(ids))}
	for i, id := range ids {
		if snap.Orders[i], ok1 = id.(string); !ok1 {
			return notify.Snapshot{}, fmt.Errorf("script replied order %v; expected a string", id)
		}
	}
	return snap, nil
}

// statusAndDetail reads a script's {status, detail} reply.
func statusAndDetail(res []any) (int64, any, error) {
	if len(res) != 2 {
		return 0, nil, fmt.Errorf("script replied %v; expected {status, detail}", res)
	}
	status, ok := res[0].(int64)
	if !ok {
		return 0, nil, fmt.Errorf("script replied status %v; expected an integer", res[0])
	}
	return status, res[1], nil
}

// Holders returns every order holding a use, with its holder.
func (g *Gate) Holders(ctx context.Context, code string) (map[string]voucher.Holder, error) {
	raw, err := g.rdb.HGetAll(ctx, g.keys(code).Orders).Result()
	if err != nil {
		return nil, fmt.Errorf("gate holders %s: %w", code, err)
	}
	holders := make(map[string]voucher.Holder, len(raw))
	for order, s := range raw {
		h, err := parseHolder(s)
		if err != nil {
			return nil, fmt.Errorf("gate holders %s: order %s: %w", code, order, err)
		}
		holders[order] = h
	}
	return holders, nil
}

// PutBack runs hold.lua for an active redemption Redis lost or holds for another customer.
func (g *Gate) PutBack(ctx context.Context, r voucher.Redemption) (bool, error) {
	h := formatHolder(voucher.Holder{CustomerID: r.CustomerID, ReservedAt: r.ReservedAt, Attempt: voucher.LoadedAttempt})
	n, err := lua.Hold.Run(ctx, g.rdb, g.keys(r.VoucherCode).List(), r.OrderID, h, r.CustomerID).Int()
	if err != nil {
		return false, fmt.Errorf("gate put back %s/%s: %w", r.VoucherCode, r.OrderID, err)
	}
	return n == 1 || n == 2, nil
}

// Recount runs recount.lua: remaining = total_limit - HLEN(orders), users recounted, with the
// total_limit of the definition the gate holds (v's if none).
func (g *Gate) Recount(ctx context.Context, v voucher.Voucher) (voucher.Recount, error) {
	res, err := lua.Recount.Run(ctx, g.rdb, g.keys(v.Code).List(), v.TotalLimit).Int64Slice()
	if err != nil || len(res) != 3 {
		return voucher.Recount{}, fmt.Errorf("gate recount %s: %v %w", v.Code, res, err)
	}
	return voucher.Recount{Loaded: res[2] >= 0, Before: res[0], After: res[1], UsersFixed: res[2] == 1}, nil
}

// LoadScripts loads every gate script into Redis (each master of a cluster), so that a sale's
// first calls run them by their digest instead of each missing it once (NOSCRIPT) and sending
// the script's text.
func (g *Gate) LoadScripts(ctx context.Context) error {
	for _, s := range lua.Gate {
		if err := s.Load(ctx, g.rdb).Err(); err != nil {
			return fmt.Errorf("load the gate's scripts: %w", err)
		}
	}
	return nil
}
