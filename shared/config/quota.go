package config

import (
	"fmt"

	"vouchergate/shared/wire"
)

// QuotaOpMapping is the mapping of POST /quotas/ops's numbers, from VG_QUOTA_OP_TYPES and
// VG_QUOTA_USER_INFO_TYPES (each the default when empty: settings filled by hand).
func (c Backend) QuotaOpMapping() (wire.QuotaOpMapping, error) {
	ops, users := c.QuotaOpTypes, c.QuotaUserInfoTypes
	if ops == "" {
		ops = wire.DefaultQuotaOpTypes
	}
	if users == "" {
		users = wire.DefaultQuotaUserInfoTypes
	}
	return wire.ParseQuotaOpMapping(ops, users)
}

// AllowQuotaEviction tells whether the backend may run on a Redis whose maxmemory-policy can
// evict quota keys (VG_QUOTA_EVICTION=allow).
func (c Backend) AllowQuotaEviction() bool { return c.QuotaEviction == "allow" }

// RefuseUnruledQuotas tells whether a deduct or check no rule covers is refused
// (VG_QUOTA_NO_RULES=refuse) rather than passed with a warning.
func (c Backend) RefuseUnruledQuotas() bool { return c.QuotaNoRules == "refuse" }

// checkQuotas reports the first quota platform setting that cannot work.
func (c Backend) checkQuotas() error {
	switch {
	case c.QuotaEviction != "refuse" && c.QuotaEviction != "allow" && c.QuotaEviction != "": // "": filled by hand, refuse
		return fmt.Errorf("VG_QUOTA_EVICTION is %q; expected refuse (do not run on a Redis that may evict quota keys) or allow", c.QuotaEviction)
	case c.QuotaNoRules != "pass" && c.QuotaNoRules != "refuse" && c.QuotaNoRules != "": // "": filled by hand, pass
		return fmt.Errorf("VG_QUOTA_NO_RULES is %q; expected pass (answer 200 with warning NO_QUOTA_RULES) or refuse (422 NO_QUOTA_RULES)", c.QuotaNoRules)
	case c.QuotaDegradeBackoff < 0:
		return fmt.Errorf("VG_QUOTA_DEGRADE_BACKOFF is %v; expected a positive duration such as 1s", c.QuotaDegradeBackoff)
	}
	_, err := c.QuotaOpMapping()
	return err
}
