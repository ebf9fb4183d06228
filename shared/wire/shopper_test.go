package wire

import (
	"reflect"
	"testing"
)

func TestShopperOwns(t *testing.T) {
	sh := Shopper{Subject: "77", Identities: map[string][]string{"DEVICE": {"d-1", "d-2"}, "PHONE": {"+33600000000"}}}
	for _, tt := range []struct {
		typ, identity string
		want          bool
	}{
		{"USER", "77", true}, {"USER", "78", false}, {"DEVICE", "d-2", true}, {"DEVICE", "d-3", false},
		{"PHONE", "+33600000000", true}, {"PHONE", "77", false}, {"CARD", "77", false}, {"user", "77", false},
	} {
		if got := sh.Owns(tt.typ, tt.identity); got != tt.want {
			t.Errorf("Owns(%s, %s) = %v; want %v", tt.typ, tt.identity, got, tt.want)
		}
	}
}

func TestShopperOrderIDs(t *testing.T) {
	for _, tt := range []struct{ stored, client string }{
		{ShopperOrderID("77", "order-1"), "order-1"}, {"order-1", "order-1"}, {ShopperOrderID("a:b", "x"), "x"},
	} {
		if got := ClientOrderID(tt.stored); got != tt.client {
			t.Errorf("ClientOrderID(%q) = %q; want %q", tt.stored, got, tt.client)
		}
	}
	if n := len(ShopperOrderID(string(make([]byte, MaxCustomerLen)), string(make([]byte, MaxOrderIDLen)))); n != MaxStoredOrderIDLen {
		t.Errorf("the longest stored orderId is %d bytes; MaxStoredOrderIDLen says %d", n, MaxStoredOrderIDLen)
	}
}

// The backend reads back exactly the identities the edge wrote, whatever their bytes; and any
// header a client could craft decodes without a panic (a client's never reaches a backend:
// the edge drops it, and a backend trusts the header only from the edge's key).
func FuzzIdentitiesRoundTrip(f *testing.F) {
	f.Add("DEVICE", "d-1", "+33612345678", "DEVICE=d-1&PHONE=%2B33")
	f.Add("PHONE", "a&b=c", "%zz", "%")
	f.Fuzz(func(t *testing.T, typ, v1, v2, raw string) {
		_ = DecodeIdentities(raw)
		if typ == "" {
			return
		}
		in := map[string][]string{typ: {v1, v2}}
		if got := DecodeIdentities(EncodeIdentities(in)); !reflect.DeepEqual(got, in) {
			t.Fatalf("round trip of %q: %q", in, got)
		}
	})
}
