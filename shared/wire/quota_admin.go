package wire

import "time"

// The admin bodies of quota overrides, counter resets and business line settings.

// QuotaOverrideRequest is the body of POST /admin/quota-overrides: for the rule of bizId,
// identityType, dimension and window, limit replaces the rule's for identity (0 blocks it),
// until expiresAt if given. The same rule and identity again replaces the override.
type QuotaOverrideRequest struct {
	BizID        int64       `json:"bizId"`
	IdentityType string      `json:"identityType"`
	Identity     string      `json:"identity"`
	Dimension    string      `json:"dimension"`
	Window       QuotaWindow `json:"window"`
	Limit        *int64      `json:"limit"`
	ExpiresAt    *time.Time  `json:"expiresAt,omitempty"`
}

// QuotaOverride is an override as stored: the answer to POST (201 created, 200 replaced), GET
// and DELETE.
type QuotaOverride struct {
	ID           int64       `json:"id"`
	RuleID       int64       `json:"ruleId"`
	BizID        int64       `json:"bizId"`
	IdentityType string      `json:"identityType"`
	Identity     string      `json:"identity"`
	Dimension    string      `json:"dimension"`
	Window       QuotaWindow `json:"window"`
	Limit        int64       `json:"limit"`
	ExpiresAt    *time.Time  `json:"expiresAt,omitempty"`
	CreatedAt    time.Time   `json:"createdAt"`
	UpdatedAt    time.Time   `json:"updatedAt"`
}

// QuotaOverrides is the body of a 200 to GET /admin/quota-overrides.
type QuotaOverrides struct {
	Overrides []QuotaOverride `json:"overrides"`
}

// QuotaResetRequest is the body of POST /admin/quota-counters/reset: the identity's counters
// of dimension (an item's dimension, "*", or "NAME:*" for all of a name), or all of them when
// dimension is absent, set to zero in their current windows.
type QuotaResetRequest struct {
	BizID        int64  `json:"bizId"`
	IdentityType string `json:"identityType"`
	Identity     string `json:"identity"`
	Dimension    string `json:"dimension,omitempty"`
}

// QuotaReset is a reset as recorded: the answer to POST /admin/quota-counters/reset and an
// entry of GET /admin/quota-counters/resets. Outcome is DONE, with what each counter held in
// cleared, or UNKNOWN for a reset whose Redis call did not answer (it may have run).
type QuotaReset struct {
	ID           int64          `json:"id"`
	BizID        int64          `json:"bizId"`
	IdentityType string         `json:"identityType"`
	Identity     string         `json:"identity"`
	Dimension    string         `json:"dimension,omitempty"`
	ResetAt      time.Time      `json:"resetAt"`
	Outcome      string         `json:"outcome"`
	Cleared      []QuotaCleared `json:"cleared"`
}

// QuotaCleared is a counter a reset set to zero, with what it held.
type QuotaCleared struct {
	Dimension string      `json:"dimension"`
	Window    QuotaWindow `json:"window"`
	Used      int64       `json:"used"`
}

// QuotaResets is the body of a 200 to GET /admin/quota-counters/resets, newest first.
type QuotaResets struct {
	Resets []QuotaReset `json:"resets"`
}

// QuotaSettingRequest is the body of POST /admin/quota-settings: whenUnavailable is CLOSED
// (the default: 503 without Redis) or OPEN (a degraded pass that counts nothing).
type QuotaSettingRequest struct {
	BizID           int64  `json:"bizId"`
	WhenUnavailable string `json:"whenUnavailable"`
}

// QuotaSetting is a business line's settings as stored.
type QuotaSetting struct {
	BizID           int64     `json:"bizId"`
	WhenUnavailable string    `json:"whenUnavailable"`
	UpdatedAt       time.Time `json:"updatedAt"`
}

// QuotaSettings is the body of a 200 to GET /admin/quota-settings.
type QuotaSettings struct {
	Settings []QuotaSetting `json:"settings"`
}
