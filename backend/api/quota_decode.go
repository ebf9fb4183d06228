package api

import (
	"bytes"
	"errors"
	"strconv"

	"vouchergate/backend/quota"
	"vouchergate/shared/wire"
)

// The deduct body, the one body read by the hand-written scanner (jsonscan.go).

var (
	errNotObject         = errors.New(notObjectProblem)
	errTooManyItems      = errors.New("items holds more than " + strconv.Itoa(wire.MaxQuotaItems) + " items; at most " + strconv.Itoa(wire.MaxQuotaItems))
	errTooManyDimensions = errors.New("items.dimensions holds more than " + strconv.Itoa(wire.MaxItemDimensions) + " dimensions; at most " + strconv.Itoa(wire.MaxItemDimensions))
)

// readDeduct reads a deduct body into req, refusing what decodeJSON refuses in strict mode.
func readDeduct(body []byte, req *wire.QuotaDeductRequest) error {
	if err := checkBody(body, strict); err != nil {
		return err
	}
	return scanDeduct(body, req)
}

// decodeDeduct reads a deduct body with read and converts its items, reading an absent amount
// as 1. Bounds are the service's to check, but for the lengths of the lists, checked here so
// that a long one is not copied.
func decodeDeduct(body []byte, read func([]byte, *wire.QuotaDeductRequest) error) (wire.QuotaDeductRequest, []quota.Item, error) {
	var req wire.QuotaDeductRequest
	if err := read(body, &req); err != nil {
		return req, nil, err
	}
	items, err := quotaItems(req.Items)
	return req, items, err
}

// scanDeduct parses a POST /quotas/deduct body into req with the scanner of jsonscan.go.
func scanDeduct(body []byte, req *wire.QuotaDeductRequest) error {
	s := scanner{b: body}
	if ok, err := s.null(); err != nil || ok {
		if err == nil {
			err = s.end()
		}
		return err
	}
	if c := s.peek(); c != '{' {
		if c == 0 {
			return s.bad()
		}
		if c == '[' || c == '"' || c == 't' || c == 'f' || c == '-' || c >= '0' && c <= '9' {
			return errNotObject
		}
		return errSyntax
	}
	err := s.object(func(key []byte) error {
		switch {
		case bytes.EqualFold(key, []byte("bizId")):
			return s.int("bizId", &req.BizID)
		case bytes.EqualFold(key, []byte("idemKey")):
			return s.str("idemKey", &req.IdemKey)
		case bytes.EqualFold(key, []byte("items")):
			return s.items(&req.Items)
		}
		return unknown(key)
	})
	if err != nil {
		return err
	}
	return s.end()
}

// items decodes the items array into *dst, reusing its elements as encoding/json does.
func (s *scanner) items(dst *[]wire.QuotaItem) error {
	if ok, err := s.null(); ok || err != nil {
		if ok {
			*dst = nil
		}
		return err
	}
	if s.peek() != '[' {
		return s.mistyped("items", "an array of objects")
	}
	items := (*dst)[:0]
	if items == nil {
		items = make([]wire.QuotaItem, 0, 1)
	}
	err := s.array(func() error {
		if len(items) < cap(items) {
			items = items[:len(items)+1]
		} else {
			items = append(items, wire.QuotaItem{})
		}
		if len(items) > wire.MaxQuotaItems {
			return errTooManyItems
		}
		return s.item(&items[len(items)-1])
	})
	*dst = items
	return err
}

func (s *scanner) item(it *wire.QuotaItem) error {
	if ok, err := s.null(); ok || err != nil {
		return err
	}
	if s.peek() != '{' {
		return s.mistyped("items", "an object")
	}
	return s.object(func(key []byte) error {
		switch {
		case bytes.EqualFold(key, []byte("identityType")):
			return s.str("items.identityType", &it.IdentityType)
		case bytes.EqualFold(key, []byte("identity")):
			return s.str("items.identity", &it.Identity)
		case bytes.EqualFold(key, []byte("dimensions")):
			return s.strings("items.dimensions", &it.Dimensions)
		case bytes.EqualFold(key, []byte("amount")):
			if ok, err := s.null(); ok || err != nil {
				if ok {
					it.Amount = nil
				}
				return err
			}
			var n int64
			if it.Amount != nil {
				n = *it.Amount
			}
			if err := s.int("items.amount", &n); err != nil {
				return err
			}
			it.Amount = &n
			return nil
		}
		return unknown(key)
	})
}

// strings decodes an array of strings into *dst, reusing its elements as encoding/json does.
func (s *scanner) strings(field string, dst *[]string) error {
	if ok, err := s.null(); ok || err != nil {
		if ok {
			*dst = nil
		}
		return err
	}
	if s.peek() != '[' {
		return s.mistyped(field, "an array of strings")
	}
	list := (*dst)[:0]
	if list == nil {
		list = make([]string, 0, 2)
	}
	err := s.array(func() error {
		if len(list) < cap(list) {
			list = list[:len(list)+1]
		} else {
			list = append(list, "")
		}
		if len(list) > wire.MaxItemDimensions {
			return errTooManyDimensions
		}
		return s.str(field, &list[len(list)-1])
	})
	*dst = list
	return err
}
