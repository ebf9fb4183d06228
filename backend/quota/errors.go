package quota

import (
	"errors"
	"fmt"
)

// Domain outcomes. The API maps each to a status and error code in one place.
var (
	// ErrInvalid: the request or rule breaks a bound or a format; the wrapping error names it.
	ErrInvalid = errors.New("invalid")
	// ErrQuotaExceeded: a counter has no room; nothing was taken. Returned as *ExceededError.
	ErrQuotaExceeded = errors.New("quota exceeded")
	// ErrRolledBack: the idemKey was rolled back; a deduct with it changes nothing.
	ErrRolledBack = errors.New("idempotency key rolled back")
	// ErrIdemKeyReused: the idemKey took from an identity for other items than these.
	ErrIdemKeyReused = errors.New("idempotency key reused with other items")
	// ErrRuleNotFound: no rule has the id.
	ErrRuleNotFound = errors.New("quota rule not found")
	// ErrTooManyRules: the bizId and identityType hold the most rules allowed.
	ErrTooManyRules = errors.New("too many quota rules")
	// ErrRollbackKeyReused: the rollbackKey gave back from the idemKey for other items than these.
	ErrRollbackKeyReused = errors.New("rollback key reused with other items")
	// ErrNoRuleToOverride: no rule has the bizId, identityType, dimension and window an override
	// names.
	ErrNoRuleToOverride = errors.New("no quota rule of this bizId, identityType, dimension and window to override")
	// ErrOverrideNotFound: no override has the id.
	ErrOverrideNotFound = errors.New("quota override not found")
	// ErrTooManyOverrides: the rule holds MaxOverridesPerRule overrides.
	ErrTooManyOverrides = errors.New("too many quota overrides")
	// ErrResetUnknown: a reset's Redis call did not answer; it may or may not have run, and its
	// record says UNKNOWN. Returned with ErrUnavailable.
	ErrResetUnknown = errors.New("the reset may or may not have run")
	// ErrNoRules: no rule of the business line covers any item (a bizId or identityType typed
	// wrong?), and the service refuses such deducts (Config.RefuseUnruled); nothing was counted.
	ErrNoRules = errors.New("no quota rule covers these items")
	// ErrUnavailable: Redis or PostgreSQL did not answer in time. A deduct's outcome may be
	// unknown: retry with the same idemKey, or roll it back.
	ErrUnavailable = errors.New("unavailable")
)

// ExceededError tells which counter refused a deduct.
type ExceededError struct {
	Counter   Counter // the counter as it stood, Used before this request
	Requested int64   // the amount that did not fit
}

func (e *ExceededError) Error() string {
	c := e.Counter
	return fmt.Sprintf("quota exceeded: %s %s %s %s: %d of %d used, %d more requested",
		c.IdentityType, c.Identity, c.Dimension, c.Window.ID(), c.Used, c.Limit, e.Requested)
}

// Is makes errors.Is(err, ErrQuotaExceeded) true.
func (e *ExceededError) Is(target error) bool { return target == ErrQuotaExceeded }

// InvalidError names what in a request or rule breaks a bound or a format.
type InvalidError struct{ Msg string }

func (e *InvalidError) Error() string { return e.Msg }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

func invalid(format string, args ...any) error {
	return &InvalidError{Msg: fmt.Sprintf(format, args...)}
}

// unavailable wraps an infrastructure error as ErrUnavailable, saying what was being done.
func unavailable(what string, err error) error {
	if errors.Is(err, ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%s: %w: %w", what, ErrUnavailable, err)
}
