package wire

import (
	"net/url"
	"strings"
)

// A shopper is the end user a request acts for, as the edge verified it from a token. Both the
// edge (before it forwards) and the backend (which trusts what the edge forwards only from a key
// with scope edge) hold a shopper's calls to its own identities, orders and idemKeys.

// IdentityUser is the quota identity type a shopper's subject is.
const IdentityUser = "USER"

// Shopper is a verified end user: its subject (the customer a reservation must be for, and its
// USER quota identity) and the other quota identities its token carries, by type (DEVICE,
// PHONE...), read from the claims the operator mapped.
type Shopper struct {
	Subject    string
	Identities map[string][]string
}

// Owns reports whether the quota identity (identityType, identity) is the shopper's own: USER
// is the subject, any other type one of the token's values for that type.
func (s *Shopper) Owns(identityType, identity string) bool {
	if identityType == IdentityUser {
		return identity == s.Subject
	}
	for _, v := range s.Identities[identityType] {
		if v == identity {
			return true
		}
	}
	return false
}

// EncodeIdentities writes identities as the edge sends them to the backends, in X-VG-Identities:
// a URL query ("DEVICE=d-1&PHONE=%2B33612345678"), types in no particular order, a type repeated
// for each of its values.
func EncodeIdentities(identities map[string][]string) string {
	q := url.Values{}
	for typ, vs := range identities {
		for _, v := range vs {
			q.Add(typ, v)
		}
	}
	return q.Encode()
}

// DecodeIdentities reads what EncodeIdentities wrote. A malformed value gives no identity: the
// shopper then owns its subject alone.
func DecodeIdentities(s string) map[string][]string {
	if s == "" {
		return nil
	}
	q, err := url.ParseQuery(s)
	if err != nil {
		return nil
	}
	return q
}

// A shopper's orderId is kept in the shopper's own scope, so that what one shopper reserves
// never takes, blocks or answers another customer's (or a service's) orderId of the same
// string: it is stored as "<customerId>/<orderId>". Neither part may hold '/' (CheckID), so
// the form names one customer and one orderId, and no client can send it as an orderId.

// MaxStoredOrderIDLen bounds an orderId as stored: a shopper's scoped form at its longest.
const MaxStoredOrderIDLen = MaxCustomerLen + 1 + MaxOrderIDLen

// ShopperOrderID is the stored form of the orderId a shopper reserved as customer.
func ShopperOrderID(customer, orderID string) string { return customer + "/" + orderID }

// ClientOrderID is the orderId its client sent for a stored one: the part after a shopper's
// scope, or the whole of a service's.
func ClientOrderID(stored string) string {
	return stored[strings.LastIndexByte(stored, '/')+1:]
}
