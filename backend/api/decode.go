package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"vouchergate/shared/wire"
)

// decodeJSON decodes body, a single JSON object, into dst, with a message naming what is wrong.
func decodeJSON(body []byte, dst any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return errors.New("body is empty; expected a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(dst); err != nil {
		var typeErr *json.UnmarshalTypeError
		var syntaxErr *json.SyntaxError
		switch {
		case errors.As(err, &typeErr) && typeErr.Field != "":
			return fmt.Errorf("%s must be %s, not %s", typeErr.Field, jsonKind(typeErr.Type.String()), typeErr.Value)
		case errors.As(err, &typeErr):
			return fmt.Errorf("body must be a JSON object, not %s", typeErr.Value)
		case errors.As(err, &syntaxErr):
			return fmt.Errorf("body is not valid JSON at byte %d: %v", syntaxErr.Offset, err)
		case errors.Is(err, io.ErrUnexpectedEOF):
			return errors.New("body is truncated JSON")
		}
		return fmt.Errorf("body is not valid: %v", err)
	}
	// Only JSON white space may follow: dec.More() would take a stray ']' or '}' for the end.
	for _, c := range body[dec.InputOffset():] {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return errors.New("body has data after the JSON object")
		}
	}
	return nil
}

func jsonKind(goType string) string {
	switch goType {
	case "string":
		return "a string"
	case "int64", "*int64", "int", "*int":
		return "a whole number"
	case "bool":
		return "true or false"
	case "time.Time", "*time.Time":
		return "an RFC 3339 time"
	}
	return "a " + goType
}

// decodeReserve decodes and checks a reservation body.
func decodeReserve(body []byte) (wire.ReserveRequest, error) {
	var req wire.ReserveRequest
	if err := decodeJSON(body, &req); err != nil {
		return req, err
	}
	if err := wire.CheckID("customerId", string(req.CustomerID), wire.MaxCustomerLen); err != nil {
		return req, err
	}
	if err := wire.CheckID("orderId", req.OrderID, wire.MaxOrderIDLen); err != nil {
		return req, err
	}
	switch {
	case req.OrderAmount == nil:
		return req, errors.New("orderAmount is required")
	case *req.OrderAmount < 0:
		return req, fmt.Errorf("orderAmount is %d; it must not be negative", *req.OrderAmount)
	}
	return req, nil
}

// voucherSpec is a checked voucher to create.
type voucherSpec struct {
	wire.VoucherSpec
	startsAt, endsAt time.Time
}

// decodeVoucherSpec decodes and checks a voucher to create.
func decodeVoucherSpec(body []byte) (voucherSpec, error) {
	var v voucherSpec
	if err := decodeJSON(body, &v.VoucherSpec); err != nil {
		return v, err
	}
	var err error
	if v.startsAt, err = time.Parse(time.RFC3339, v.StartsAt); err != nil {
		return v, fmt.Errorf("startsAt %q must be an RFC 3339 time such as 2026-12-02T10:00:00Z", v.StartsAt)
	}
	if v.endsAt, err = time.Parse(time.RFC3339, v.EndsAt); err != nil {
		return v, fmt.Errorf("endsAt %q must be an RFC 3339 time such as 2026-12-02T10:00:00Z", v.EndsAt)
	}
	if v.PerUserLimit == nil {
		one := 1
		v.PerUserLimit = &one
	}
	switch {
	case !wire.ValidCode(v.Code):
		return v, fmt.Errorf("code %q must match ^[A-Z0-9_-]{1,32}$", v.Code)
	case v.DiscountAmount == nil:
		return v, errors.New("discountAmount is required")
	case *v.DiscountAmount < 0:
		return v, errors.New("discountAmount must not be negative")
	case v.MinOrderAmount < 0:
		return v, errors.New("minOrderAmount must not be negative")
	case v.TotalLimit == nil:
		return v, errors.New("totalLimit is required")
	case *v.TotalLimit < 0 || *v.TotalLimit > wire.MaxTotalLimit:
		return v, fmt.Errorf("totalLimit must be between 0 and %d", wire.MaxTotalLimit)
	case *v.PerUserLimit < 1 || *v.PerUserLimit > wire.MaxPerUserLimit:
		return v, fmt.Errorf("perUserLimit must be between 1 and %d", wire.MaxPerUserLimit)
	case !v.endsAt.After(v.startsAt):
		return v, errors.New("endsAt must be after startsAt")
	}
	return v, nil
}
