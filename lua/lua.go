// Package lua embeds every Redis script of vouchergate. Each script's header names its KEYS,
// ARGV and what it returns.
package lua

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed reserve.lua
	reserveSrc string
	//go:embed release.lua
	releaseSrc string
	//go:embed load.lua
	loadSrc string
	//go:embed hold.lua
	holdSrc string
	//go:embed recount.lua
	recountSrc string
)

// Voucher gate scripts. redis.Script runs EVALSHA and falls back to EVAL once per server.
var (
	Reserve = redis.NewScript(reserveSrc)
	Release = redis.NewScript(releaseSrc)
	Load    = redis.NewScript(loadSrc)
	Hold    = redis.NewScript(holdSrc)
	Recount = redis.NewScript(recountSrc)
)
