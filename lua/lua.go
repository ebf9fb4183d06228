// Package lua embeds every Redis script of vouchergate. Each script's header names its KEYS,
// ARGV and what it returns.
package lua

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed version.lua
	versionSrc string
	//go:embed state.lua
	stateSrc string
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
	//go:embed peek.lua
	peekSrc string
	//go:embed configure.lua
	configureSrc string
)

// Voucher gate scripts. redis.Script runs EVALSHA and falls back to EVAL once per server.
// Those that change remaining or orders start with version.lua, which raises the voucher's
// version; State reads it with the state it names.
var (
	Reserve = redis.NewScript(versionSrc + reserveSrc)
	Release = redis.NewScript(versionSrc + releaseSrc)
	Load    = redis.NewScript(versionSrc + loadSrc)
	Hold    = redis.NewScript(versionSrc + holdSrc)
	Recount = redis.NewScript(versionSrc + recountSrc)
	// Configure gives the gate a voucher's definition (an edit, or a copy the gate missed).
	Configure = redis.NewScript(versionSrc + configureSrc)
	State     = redis.NewScript(stateSrc)
	// Peek changes nothing: a dry run's read of what Reserve would decide on.
	Peek = redis.NewScript(peekSrc)
)

// Gate is every voucher gate script, for loading them into Redis before the backend serves.
var Gate = []*redis.Script{Reserve, Release, Load, Hold, Recount, Configure, State, Peek}
