// Package keys names the Redis keys of vouchergate. All keys of one voucher share the hash tag
// {CODE}, so a script touching them runs on Redis Cluster.
package keys

import (
	"fmt"
	"strings"
)

// Voucher names the keys of a flash voucher's gate.
type Voucher struct {
	Remaining string // uses left: an integer
	Users     string // hash customerId -> active uses
	Orders    string // hash orderId -> holder ("reservedAtMillis:attempt:customerId")
	// Version orders the voucher's states: every script that changes remaining or orders
	// raises it (lua/version.lua), so two states read from Redis compare by it.
	Version string
	// Definition is a hash of what the gate enforces of the voucher's definition, as of the
	// voucher's revision: rev, total (total_limit), perUser (per_user_limit), paused (1 or 0).
	Definition string
}

// ForVoucher returns the keys of voucher code under prefix.
func ForVoucher(prefix, code string) Voucher {
	base := prefix + "voucher:{" + code + "}:"
	return Voucher{Remaining: base + "remaining", Users: base + "users", Orders: base + "orders", Version: base + "version",
		Definition: base + "definition"}
}

// List returns the keys in the order every voucher script takes them.
func (v Voucher) List() []string {
	return []string{v.Remaining, v.Users, v.Orders, v.Version, v.Definition}
}

// CheckPrefix reports why p cannot be a key prefix: a brace would move the hash tag.
func CheckPrefix(p string) error {
	if strings.ContainsAny(p, "{}") {
		return fmt.Errorf("redis key prefix %q must not contain '{' or '}'", p)
	}
	return nil
}
