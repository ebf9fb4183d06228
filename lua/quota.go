package lua

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed quota_deduct.lua
	quotaDeductSrc string
	//go:embed quota_giveback.lua
	quotaGiveBackSrc string
	//go:embed quota_register.lua
	quotaRegisterSrc string
	//go:embed quota_settle.lua
	quotaSettleSrc string
	//go:embed quota_close.lua
	quotaCloseSrc string
	//go:embed quota_usage.lua
	quotaUsageSrc string
	//go:embed quota_check.lua
	quotaCheckSrc string
	//go:embed quota_partial.lua
	quotaPartialSrc string
	//go:embed quota_rollback_key.lua
	quotaRollbackKeySrc string
	//go:embed quota_reset.lua
	quotaResetSrc string
)

// Purchase quota scripts; see each file's header.
var (
	QuotaDeduct      = redis.NewScript(quotaDeductSrc)
	QuotaGiveBack    = redis.NewScript(quotaGiveBackSrc)
	QuotaRegister    = redis.NewScript(quotaRegisterSrc)
	QuotaSettle      = redis.NewScript(quotaSettleSrc)
	QuotaClose       = redis.NewScript(quotaCloseSrc)
	QuotaUsage       = redis.NewScript(quotaUsageSrc)
	QuotaCheck       = redis.NewScript(quotaCheckSrc) // changes nothing: a deduct's dry run
	QuotaPartial     = redis.NewScript(quotaPartialSrc)
	QuotaRollbackKey = redis.NewScript(quotaRollbackKeySrc)
	QuotaReset       = redis.NewScript(quotaResetSrc)
)
