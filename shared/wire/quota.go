package wire

import "time"

// Bounds on purchase quota requests, so that no Redis key or script call grows large. A value
// over a bound is a 400 naming it.
const (
	MaxIdemKeyLen        = 64      // bytes of an idemKey
	MaxIdentityTypeLen   = 32      // bytes of an identityType: ^[A-Z0-9_]{1,32}$
	MaxIdentityLen       = 64      // bytes of an identity (user id, device id, phone number...)
	MaxDimensionLen      = 64      // bytes of a dimension such as "ITEM:1001"
	MaxQuotaItems        = 16      // items in one deduct
	MaxItemDimensions    = 8       // dimensions of one item
	MaxQuotaAmount       = 1000000 // amount of one item
	MaxQuotaLimit        = 1000000000000000
	MaxQuotaRulesPerType = 64 // rules of one bizId and identityType
)

// Purchase quota error codes, the values of Error.Error (QuotaExceeded.Error for the first).
const (
	// CodeQuotaExceeded: a counter has no room for the amount; nothing was taken (409).
	CodeQuotaExceeded = "QUOTA_EXCEEDED"
	// CodeQuotaRolledBack: the idemKey was rolled back; it cannot deduct again (409).
	CodeQuotaRolledBack = "QUOTA_ROLLED_BACK"
	// CodeIdemKeyReused: the idemKey deducted other items for the same identity (409).
	CodeIdemKeyReused = "IDEMPOTENCY_KEY_REUSED"
	// CodeQuotaRuleNotFound: no rule has the id (404).
	CodeQuotaRuleNotFound = "QUOTA_RULE_NOT_FOUND"
	// CodeNoQuotaRules: no rule of the bizId covers the items, and the backend refuses such
	// deducts (VG_QUOTA_NO_RULES=refuse) (422). As a warning of a 200 (WarningNoQuotaRules)
	// otherwise.
	CodeNoQuotaRules = "NO_QUOTA_RULES"
	// CodeTooManyQuotaRules: the bizId and identityType hold MaxQuotaRulesPerType rules (409).
	CodeTooManyQuotaRules = "TOO_MANY_QUOTA_RULES"
	// CodeRollbackKeyReused: the rollbackKey gave back for other items (409).
	CodeRollbackKeyReused = "ROLLBACK_KEY_REUSED"
	// CodeQuotaOverrideNotFound: no override has the id (404).
	CodeQuotaOverrideNotFound = "QUOTA_OVERRIDE_NOT_FOUND"
	// CodeTooManyQuotaOverrides: the rule holds the most overrides allowed (409).
	CodeTooManyQuotaOverrides = "TOO_MANY_QUOTA_OVERRIDES"
)

// QuotaDeductRequest is the body of POST /quotas/deduct.
type QuotaDeductRequest struct {
	BizID   int64       `json:"bizId"`
	IdemKey string      `json:"idemKey"`
	Items   []QuotaItem `json:"items"`
}

// QuotaItem is one thing bought by one identity. Amount defaults to 1 when absent.
type QuotaItem struct {
	IdentityType string   `json:"identityType"`
	Identity     string   `json:"identity"`
	Dimensions   []string `json:"dimensions"`
	Amount       *int64   `json:"amount,omitempty"`
}

// QuotaWindow is a rule's window:
// {"type":"DAY"|"WEEK"|"MONTH","timezone":"Asia/Shanghai"}, {"type":"ROLLING","size":"24h"}
// or {"type":"FIXED","start":"2025-11-11T00:00:00+08:00","end":"2025-11-12T00:00:00+08:00"}.
type QuotaWindow struct {
	Type     string     `json:"type"`
	Timezone string     `json:"timezone,omitempty"`
	Size     string     `json:"size,omitempty"`
	Start    *time.Time `json:"start,omitempty"`
	End      *time.Time `json:"end,omitempty"`
}

// QuotaCounter is one counter a rule implies for an identity and a dimension, as it stands.
type QuotaCounter struct {
	IdentityType string      `json:"identityType"`
	Identity     string      `json:"identity"`
	Dimension    string      `json:"dimension"`
	Window       QuotaWindow `json:"window"`
	Used         int64       `json:"used"`
	Limit        int64       `json:"limit"`
	// Shadow: only SHADOW rules imply the counter; Limit is theirs, and nothing refuses on it.
	Shadow bool `json:"shadow,omitempty"`
	// ResetsAt: when the period ends (calendar, fixed), or when the oldest purchase still
	// counting stops counting (rolling; absent when none counts).
	ResetsAt *time.Time `json:"resetsAt,omitempty"`
}

// QuotaDeductResponse is the body of a 200 to a deduct, and of every retry of it.
type QuotaDeductResponse struct {
	IdemKey  string         `json:"idemKey"`
	Counters []QuotaCounter `json:"counters"`
	// WouldExceed: the SHADOW rules that would have refused this deduct.
	WouldExceed []QuotaWouldExceed `json:"wouldExceed,omitempty"`
	// Degraded: Redis could not be reached and the business line degrades OPEN: nothing was
	// counted, counters is empty.
	Degraded bool `json:"degraded,omitempty"`
	// Warning: WarningNoQuotaRules when no rule covers the items: nothing was limited.
	Warning string `json:"warning,omitempty"`
}

// QuotaWouldExceed is a SHADOW rule that would have refused a deduct that passed: the counter
// as the deduct left it, with the rule's limit, which its used passes.
type QuotaWouldExceed struct {
	RuleID  int64        `json:"ruleId"`
	Counter QuotaCounter `json:"counter"`
}

// QuotaExceeded is the body of a 409 QUOTA_EXCEEDED: the first counter found full, with its
// current use, and the amount that did not fit.
type QuotaExceeded struct {
	Error     string       `json:"error"`
	Message   string       `json:"message"`
	Counter   QuotaCounter `json:"counter"`
	Requested int64        `json:"requested"`
}

// QuotaCheckResponse is the body of a 200 to POST /quotas/check, a deduct's dry run with the
// deduct's body: whether a deduct would pass now and, if so, the counters it would reach (for
// an idemKey that deducted already, the counters its deduct answered, as a retry gets them);
// if not, the deduct's error code and, for QUOTA_EXCEEDED, the 409 body it would get. It is
// advisory: another deduct may take the room in between.
type QuotaCheckResponse struct {
	Pass     bool           `json:"pass"`
	IdemKey  string         `json:"idemKey"`
	Counters []QuotaCounter `json:"counters"`           // when pass (as the deduct's, maybe none); empty when not
	Error    string         `json:"error,omitempty"`    // when not: QUOTA_EXCEEDED, QUOTA_ROLLED_BACK, IDEMPOTENCY_KEY_REUSED
	Exceeded *QuotaExceeded `json:"exceeded,omitempty"` // when QUOTA_EXCEEDED: the deduct's 409 body
	// WouldExceed, Degraded, Warning: as the deduct's
	WouldExceed []QuotaWouldExceed `json:"wouldExceed,omitempty"`
	Degraded    bool               `json:"degraded,omitempty"`
	Warning     string             `json:"warning,omitempty"`
}

// QuotaRollbackRequest is the body of POST /quotas/rollback: the whole of the deduct with
// idemKey, or with items and a rollbackKey a part of it (items as a deduct's: up to each
// item's amount on the counters its dimensions name).
type QuotaRollbackRequest struct {
	BizID       int64       `json:"bizId"`
	IdemKey     string      `json:"idemKey"`
	RollbackKey string      `json:"rollbackKey,omitempty"`
	Items       []QuotaItem `json:"items,omitempty"`
}

// QuotaReturned is what a rollback gave back to one counter.
type QuotaReturned struct {
	IdentityType string      `json:"identityType"`
	Identity     string      `json:"identity"`
	Dimension    string      `json:"dimension"`
	Window       QuotaWindow `json:"window"`
	Amount       int64       `json:"amount"`
}

// QuotaRollbackResponse is the body of a 200 to a rollback: what this call gave back (nothing
// when the idemKey is unknown or was rolled back before).
type QuotaRollbackResponse struct {
	IdemKey     string          `json:"idemKey"`
	RollbackKey string          `json:"rollbackKey,omitempty"` // a partial rollback's
	Returned    []QuotaReturned `json:"returned"`
	// Replayed: this partial rollback's rollbackKey gave back before, with the same items;
	// Returned is what it gave back then, and nothing more was given back now.
	Replayed bool `json:"replayed,omitempty"`
}

// QuotaUsageResponse is the body of a 200 to GET /quotas/usage.
type QuotaUsageResponse struct {
	BizID        int64          `json:"bizId"`
	IdentityType string         `json:"identityType"`
	Identity     string         `json:"identity"`
	Counters     []QuotaCounter `json:"counters"`
}

// QuotaRuleRequest is the body of POST /admin/quota-rules. A rule with the same bizId,
// identityType, dimension and window is updated (its counters kept); otherwise one is created.
type QuotaRuleRequest struct {
	BizID        int64       `json:"bizId"`
	IdentityType string      `json:"identityType"`
	Dimension    string      `json:"dimension"`
	Limit        *int64      `json:"limit"`
	Window       QuotaWindow `json:"window"`
	Mode         string      `json:"mode,omitempty"` // ENFORCE (the default) or SHADOW
}

// QuotaRule is a rule as stored: the answer to POST (201 created, 200 updated) and GET.
type QuotaRule struct {
	ID           int64       `json:"id"`
	BizID        int64       `json:"bizId"`
	IdentityType string      `json:"identityType"`
	Dimension    string      `json:"dimension"`
	Limit        int64       `json:"limit"`
	Window       QuotaWindow `json:"window"`
	Mode         string      `json:"mode"`
	CreatedAt    time.Time   `json:"createdAt"`
	UpdatedAt    time.Time   `json:"updatedAt"`
}

// QuotaRules is the body of a 200 to GET /admin/quota-rules.
type QuotaRules struct {
	Rules []QuotaRule `json:"rules"`
}

// WarningNoQuotaRules is a deduct's or check's warning when no rule of its bizId covers its
// items: it passed, and limited nothing (a bizId or identityType typed wrong?).
const WarningNoQuotaRules = CodeNoQuotaRules
