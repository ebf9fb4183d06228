package api

import (
	"errors"
	"log/slog"
	"strconv"

	"github.com/valyala/fasthttp"

	"vouchergate/backend/quota"
	"vouchergate/backend/voucher"
	"vouchergate/shared/wire"
)

// outcome is how one domain error is answered.
type outcome struct {
	err     error
	status  int
	code    string
	reason  string // why, for NOT_ELIGIBLE; empty: none
	message string // what the client is told; empty: the error's own text
}

// outcomes maps every domain error of the voucher and quota services to its status and error
// code: the one place where they meet HTTP. The first that matches (errors.Is) answers.
var outcomes = []outcome{
	{err: voucher.ErrOutOfStock, status: fasthttp.StatusConflict, code: wire.CodeOutOfStock},
	{err: voucher.ErrAlreadyUsed, status: fasthttp.StatusConflict, code: wire.CodeAlreadyUsed},
	// each reason before the bare ErrNotEligible, which it is a case of
	{err: voucher.ErrPaused, status: fasthttp.StatusUnprocessableEntity, code: wire.CodeNotEligible, reason: wire.ReasonPaused,
		message: "the voucher is paused"},
	{err: voucher.ErrNotStarted, status: fasthttp.StatusUnprocessableEntity, code: wire.CodeNotEligible, reason: wire.ReasonNotStarted,
		message: "the voucher has not started"},
	{err: voucher.ErrEnded, status: fasthttp.StatusUnprocessableEntity, code: wire.CodeNotEligible, reason: wire.ReasonEnded,
		message: "the voucher has ended"},
	{err: voucher.ErrOrderTooSmall, status: fasthttp.StatusUnprocessableEntity, code: wire.CodeNotEligible, reason: wire.ReasonOrderTooSmall,
		message: "the order amount is below the voucher's minOrderAmount"},
	{err: voucher.ErrNotEligible, status: fasthttp.StatusUnprocessableEntity, code: wire.CodeNotEligible},
	{err: voucher.ErrVoucherNotFound, status: fasthttp.StatusNotFound, code: wire.CodeVoucherNotFound},
	// one message for every missing order: a shopper's orders are stored in its scope, and
	// another customer's order must read exactly as no order at all (subject.go)
	{err: voucher.ErrReservationNotFound, status: fasthttp.StatusNotFound, code: wire.CodeReservationNotFound,
		message: "the voucher has no reservation for this orderId"},
	{err: voucher.ErrOrderAmbiguous, status: fasthttp.StatusConflict, code: wire.CodeOrderAmbiguous,
		message: "several shoppers reserved this orderId; name the customer with ?customerId="},
	{err: voucher.ErrReleased, status: fasthttp.StatusConflict, code: wire.CodeReservationReleased},
	{err: voucher.ErrConfirmed, status: fasthttp.StatusConflict, code: wire.CodeReservationConfirmed},
	{err: voucher.ErrRefunded, status: fasthttp.StatusConflict, code: wire.CodeReservationRefunded,
		message: "the reservation was refunded; its use went back"},
	{err: voucher.ErrNotConfirmed, status: fasthttp.StatusConflict, code: wire.CodeNotConfirmed,
		message: "the reservation is not confirmed; release it instead"},
	{err: voucher.ErrVoucherExists, status: fasthttp.StatusConflict, code: wire.CodeVoucherExists},
	{err: voucher.ErrLimitBelowUsed, status: fasthttp.StatusConflict, code: wire.CodeLimitBelowUsed},
	{err: voucher.ErrBadEdit, status: fasthttp.StatusBadRequest, code: wire.CodeBadRequest},
	{err: voucher.ErrVoucherInUse, status: fasthttp.StatusConflict, code: wire.CodeVoucherInUse,
		message: "the voucher has redemptions; end it with PATCH endsAt instead"},
	{err: voucher.ErrUnavailable, status: fasthttp.StatusServiceUnavailable, code: wire.CodeUnavailable,
		message: "a store did not answer in time; retry with the same orderId"},

	{err: quota.ErrInvalid, status: fasthttp.StatusBadRequest, code: wire.CodeBadRequest},
	// answered with the full counter by respondOutcome
	{err: quota.ErrQuotaExceeded, status: fasthttp.StatusConflict, code: wire.CodeQuotaExceeded},
	{err: quota.ErrRolledBack, status: fasthttp.StatusConflict, code: wire.CodeQuotaRolledBack,
		message: "this idemKey was rolled back; use a new one"},
	{err: quota.ErrIdemKeyReused, status: fasthttp.StatusConflict, code: wire.CodeIdemKeyReused,
		message: "this idemKey deducted other items for the same identity"},
	{err: quota.ErrNoRules, status: fasthttp.StatusUnprocessableEntity, code: wire.CodeNoQuotaRules,
		message: "no quota rule of this bizId covers these items, and VG_QUOTA_NO_RULES=refuse"},
	{err: quota.ErrRuleNotFound, status: fasthttp.StatusNotFound, code: wire.CodeQuotaRuleNotFound,
		message: "no quota rule has this id"},
	{err: quota.ErrTooManyRules, status: fasthttp.StatusConflict, code: wire.CodeTooManyQuotaRules,
		message: "a bizId and identityType hold at most " + strconv.Itoa(wire.MaxQuotaRulesPerType) + " rules"},
	{err: quota.ErrRollbackKeyReused, status: fasthttp.StatusConflict, code: wire.CodeRollbackKeyReused,
		message: "this rollbackKey gave back for other items of the idemKey; use a new one"},
	{err: quota.ErrNoRuleToOverride, status: fasthttp.StatusNotFound, code: wire.CodeQuotaRuleNotFound,
		message: "no quota rule has this bizId, identityType, dimension and window to override"},
	{err: quota.ErrOverrideNotFound, status: fasthttp.StatusNotFound, code: wire.CodeQuotaOverrideNotFound,
		message: "no quota override has this id"},
	{err: quota.ErrTooManyOverrides, status: fasthttp.StatusConflict, code: wire.CodeTooManyQuotaOverrides,
		message: "a rule holds at most " + strconv.Itoa(quota.MaxOverridesPerRule) + " overrides"},
	{err: quota.ErrResetUnknown, status: fasthttp.StatusServiceUnavailable, code: wire.CodeUnavailable,
		message: "Redis did not answer: the reset may or may not have run (on record as UNKNOWN); read the counters before sending it again"},
	{err: quota.ErrUnavailable, status: fasthttp.StatusServiceUnavailable, code: wire.CodeUnavailable,
		message: "try again with the same idemKey"},
}

// unexpected answers an error that is in no row of outcomes: a failure the client can only
// retry.
var unexpected = outcome{status: fasthttp.StatusServiceUnavailable, code: wire.CodeUnavailable,
	message: "the request could not be completed; retry it as it was"}

func outcomeOf(err error) (outcome, bool) {
	for _, o := range outcomes {
		if errors.Is(err, o.err) {
			return o, true
		}
	}
	return unexpected, false
}

// refusalCode is the error code a dry run answers "not valid" with for err: the code of a
// refusal (409 or 422) the real call would answer. Other errors (404, 503) are answered as
// the real call's.
func refusalCode(err error) (string, bool) {
	code, _, ok := refusal(err)
	return code, ok
}

// refusal is refusalCode with the refusal's reason (NOT_ELIGIBLE's; "" for none).
func refusal(err error) (code, reason string, ok bool) {
	o, known := outcomeOf(err)
	if known && (o.status == fasthttp.StatusConflict || o.status == fasthttp.StatusUnprocessableEntity) {
		return o.code, o.reason, true
	}
	return "", "", false
}

// respondOutcome answers a service error from outcomes, logging the 503s: at warning level
// when a store was unavailable, as an error when the failure was unexpected; one line a second
// for each level and route's shape at most (failureKind), the next one counting those left out
// (dropped=), as a store that is down fails every request alike.
func (s *Server) respondOutcome(ctx *fasthttp.RequestCtx, err error) {
	o, known := outcomeOf(err)
	if o.status == fasthttp.StatusServiceUnavailable {
		level := slog.LevelWarn
		if !known {
			level = slog.LevelError
		}
		if dropped, ok := s.failures.Admit(failureKind(level, ctx)); ok {
			attrs := []any{"method", string(ctx.Method()), "path", string(ctx.Path()), "err", err}
			if dropped > 0 {
				attrs = append(attrs, "dropped", dropped)
			}
			s.log.Log(ctx, level, "request failed", attrs...)
		}
	}
	var ex *quota.ExceededError
	if errors.As(err, &ex) {
		respondJSON(ctx, o.status, exceededWire(o.code, ex))
		return
	}
	msg := o.message
	if msg == "" {
		msg = err.Error()
	}
	respondErrorWhy(ctx, o.status, o.code, o.reason, msg)
}

// exceededWire is the 409 body of a full counter, with its code.
func exceededWire(code string, ex *quota.ExceededError) *wire.QuotaExceeded {
	return &wire.QuotaExceeded{Error: code, Message: ex.Error(), Counter: counterWire(&ex.Counter), Requested: ex.Requested}
}
